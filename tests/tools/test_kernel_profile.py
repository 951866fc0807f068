"""bench/kernel_profile.py on a hand-made ncu CSV: the last complete window's lines, the attention
file's last kernels, and empty CSVs (ncu recorded nothing) written as zero kernels."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import kernel_profile  # noqa: E402
import test_kernel_limits as fixture  # noqa: E402


def run(out, sfx=""):
    return subprocess.run([sys.executable, str(ROOT / "bench" / "kernel_profile.py"), str(out), sfx],
                          capture_output=True, text=True, check=True).stdout


def test_window_lines(tmp_path):
    fixture.write_csv(tmp_path / "ncu-ctx64-w4.csv")
    fixture.write_csv(tmp_path / "ncu-attention-ctx4096-w4.csv")
    printed = run(tmp_path, "-w4")
    # The middle window: ids 3..6 (get_rows, hc_broadcast, two gate/up launches of 10 and 30 us).
    assert (tmp_path / "kernels-ctx64-w4.txt").read_text().splitlines() == [
        "3 get_rows_quant_kernel<18> grid=1280 2.00us",
        "4 hc_broadcast_kernel grid=1280 1.00us",
        "5 grouped_direct_kernel<18, 1, 5> grid=1280 10.00us",
        "6 grouped_direct_kernel<18, 1, 5> grid=1280 30.00us",
        "total 43.0us over 4 kernels",
    ]
    assert printed == "total 43.0us over 4 kernels\n"
    # The attention file keeps its last 14 kernels: all 10 of the fixture's.
    attention = (tmp_path / "kernels-attention-ctx4096-w4.txt").read_text().splitlines()
    assert attention[0].startswith("0 get_rows_quant_kernel<18> ") and attention[-1] == "total 57.0us over 10 kernels"


def test_no_records(tmp_path):
    (tmp_path / "ncu-ctx64.csv").write_text("==PROF== Connected to process 1\n==ERROR== no kernels were profiled\n")
    assert run(tmp_path) == "total 0.0us over 0 kernels\n"
    assert (tmp_path / "kernels-attention-ctx4096.txt").read_text() == "total 0.0us over 0 kernels\n"


def test_lines_keep_ncu_ids():
    seq = [("k", {"id": 41, "launch__grid_size": 8.0, "gpu__time_duration.sum": 1500.0})]
    assert kernel_profile.lines(seq) == "41 k grid=8 1.50us\ntotal 1.5us over 1 kernels\n"
