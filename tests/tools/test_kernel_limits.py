"""bench/kernel_limits.py on a hand-made ncu CSV: the last complete window, its lines and sums."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import kernel_limits  # noqa: E402

# Kernel names as ncu 2025 writes them (namespaces shortened, `<unnamed>` sometimes cut to `unnamed>`).
GET_ROWS = "void unnamed>::get_rows_quant_kernel<18>(const unsigned char *, int)"
BROADCAST = "void unnamed>::hc_broadcast_kernel(const float *, int, int, int, float *)"
GATE_UP = "void moe_detail::<unnamed>::grouped_direct_kernel<18, 1, 5>(moe_detail::GroupedArgs, int, int, moe_detail::CombineTail)"
CUPTI_STYLE = ("void strata::cuda::moe_detail::(anonymous namespace)::grouped_direct_kernel<(strata::quant::Type)18, 1, 5>"
               "(strata::cuda::moe_detail::GroupedArgs, int, int, strata::cuda::moe_detail::CombineTail)")
HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def records(kid, name, ns, dram_bytes, issue):
    """One kernel's metric rows: ns of time, bytes read from DRAM, issue slots busy (%)."""
    values = {kernel_limits.TIME: f"{ns:,}", kernel_limits.DRAM_BYTES: f"{dram_bytes:,}",
              "smsp__issue_active.avg.pct_of_peak_sustained_active": str(issue), "launch__grid_size": "1280"}
    return [f'"{kid}","1","strata","h","{name}","1","7","(160, 1, 1)","(128, 10, 1)","0","9.0","Command line profiler metrics",'
            f'"{metric}","x","{value}"' for metric, value in values.items()]


def write_csv(path):
    """Three windows (get_rows, hc_broadcast, gate/up x n): the middle one, the last complete one,
    holds two gate/up launches of 10 and 30 us reading 5 and 15 MB."""
    lines = ["==PROF== Connected to process 1", HEADER]
    kid = 0
    for window, gate_ups in enumerate([[(1000, 1e6)], [(10000, 5e6), (30000, 15e6)], [(7000, 1e6)]]):
        for name, ns, b in [(GET_ROWS, 2000, 0), (BROADCAST, 1000, 0)] + [(GATE_UP, ns, b) for ns, b in gate_ups]:
            lines += records(kid, name, ns, int(b), 50.0 + window)
            kid += 1
    path.write_text("\n".join(lines) + "\n")


def test_short_name():
    assert kernel_limits.short_name(GATE_UP) == "grouped_direct_kernel<18, 1, 5>"
    assert kernel_limits.short_name(BROADCAST) == "hc_broadcast_kernel"
    assert kernel_limits.short_name(CUPTI_STYLE) == "grouped_direct_kernel<18, 1, 5>"


def test_last_complete_window(tmp_path):
    path = tmp_path / "ncu.csv"
    write_csv(path)
    window = kernel_limits.last_window(kernel_limits.read(path.read_text()))
    assert [n for n, _ in window] == ["get_rows_quant_kernel<18>", "hc_broadcast_kernel", "grouped_direct_kernel<18, 1, 5>",
                                      "grouped_direct_kernel<18, 1, 5>"]
    text = kernel_limits.report(window)
    lines = text.splitlines()
    # 10 us, 5 MB: 500 GB/s; issue 51% (the second window's value).
    assert lines[3].split()[:3] == ["10.00", "5.00", "500"] and lines[3].split()[4] == "51.0"
    summed = [l for l in lines if l.endswith("grouped_direct_kernel<18, 1, 5>") and l.split()[0] == "2"]
    assert summed and summed[0].split()[1:4] == ["40.00", "20.00", "500"]
    assert lines[-1] == "total 43.0 us, 20.0 MB over 4 kernels"


def test_cli_refuses_output_without_records(tmp_path):
    csv_path = tmp_path / "ncu.csv"
    csv_path.write_text("==ERROR== the application returned an error\n")
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "kernel_limits.py"), str(csv_path), str(tmp_path / "o.txt")],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "no ncu records" in r.stderr
