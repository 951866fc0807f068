"""bench/kernel_trace.py on hand-made CUPTI records: names, graph grouping, the added times."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import kernel_trace  # noqa: E402

PRE = "void strata::cuda::(anonymous namespace)::hc_pre_kernel<(strata::quant::Type)30, 1>(strata::cuda::(anonymous namespace)::HcPreParams)"
DOWN = ("void strata::cuda::moe_detail::(anonymous namespace)::grouped_direct_kernel<(strata::quant::Type)42, 1, 5>"
        "(strata::cuda::moe_detail::GroupedArgs, int, int, strata::cuda::moe_detail::CombineTail)")
SIDE = "void strata::cuda::swiglu_kernel(const float*, const float*, int)"


def test_short_name():
    assert kernel_trace.short_name(PRE) == "hc_pre_kernel<30, 1>"
    assert kernel_trace.short_name(DOWN) == "grouped_direct_kernel<42, 1, 5>"
    assert kernel_trace.short_name(SIDE) == "swiglu_kernel"


def kernel(start, end, corr, graph, node, name):
    return "\t".join(map(str, ["K", start, end, corr, graph, node, 7, 1, 1, 1, 32, name]))


def write_trace(path):
    """Graph 3 launched 10 times, each launch (ns from its first start t0): hc_pre [0, 10000];
    grouped_direct [4000, 14000], started early under PDL, so it adds only 4000; swiglu on a side
    stream [5000, 9000] ends first, so it adds 9000 and hc_pre then 1000. A kernel outside any
    graph (graph 0) and a graph launched only twice are left out."""
    lines = [kernel(0, 500, 1, 0, 0, PRE)]
    for i in range(10):
        t0 = 100000 * (i + 1)
        corr = 10 + i
        lines.append(kernel(t0, t0 + 10000, corr, 3, 1, PRE))
        lines.append(kernel(t0 + 4000, t0 + 14000, corr, 3, 2, DOWN))
        lines.append(kernel(t0 + 5000, t0 + 9000, corr, 3, 3, SIDE))
    for i in range(2):
        lines.append(kernel(5000000 + i * 1000, 5000000 + i * 1000 + 300, 90 + i, 4, 1, PRE))
    path.write_text("\n".join(lines) + "\n")


def test_added_times(tmp_path):
    trace = tmp_path / "t.tsv"
    write_trace(trace)
    graphs = kernel_trace.summarise(kernel_trace.read(str(trace)), last=8, min_replays=8)
    assert [g["graph_id"] for g in graphs] == [3]
    g = graphs[0]
    assert g["launches"] == 8 and g["nodes"] == 3
    assert g["span_us_median"] == 14.0 and g["period_us_median"] == 100.0
    added = {r["kernel"]: r["added_us"] for r in g["kernels"]}
    assert added == {"swiglu_kernel": 9.0, "hc_pre_kernel<30, 1>": 1.0, "grouped_direct_kernel<42, 1, 5>": 4.0}
    assert sum(added.values()) == g["span_us_median"]
    dur = {r["kernel"]: r["mean_duration_us"] for r in g["kernels"]}
    assert dur["grouped_direct_kernel<42, 1, 5>"] == 10.0
    # By end: swiglu starts 5 us after the launch's start (nothing ended before it), hc_pre was
    # running 9 us before swiglu ended, grouped_direct 6 us before hc_pre ended.
    lead = {r["kernel"]: r["mean_lead_us"] for r in g["kernels"]}
    assert lead == {"swiglu_kernel": -5.0, "hc_pre_kernel<30, 1>": 9.0, "grouped_direct_kernel<42, 1, 5>": 6.0}


def test_cli_rejects_a_trace_without_graphs(tmp_path):
    trace = tmp_path / "t.tsv"
    trace.write_text(kernel(0, 500, 1, 0, 0, PRE) + "\n")
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "kernel_trace.py"), str(trace)], capture_output=True, text=True)
    assert r.returncode != 0 and "no graph launched" in r.stderr
