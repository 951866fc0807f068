"""bench/kernel_trace_diff.py on two hand-made kernel_trace summaries."""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import kernel_trace_diff  # noqa: E402


def graph(gid, span, added, nodes=10):
    return {"graph_id": gid, "launches": 8, "nodes": nodes, "span_us_median": span, "period_us_median": None,
            "kernels": [{"kernel": k, "per_launch": 1, "added_us": v, "share": v / span, "mean_duration_us": v}
                        for k, v in added.items()]}


A = [graph(14, 100.0, {"gate_up": 40.0, "route": 10.0, "shared_down": 50.0}), graph(2, 30.0, {"x": 30.0})]
B = [graph(14, 90.0, {"gate_up": 30.0, "route": 11.0, "shared_down": 49.0}), graph(5, 20.0, {"y": 20.0})]


def test_largest_differences_first():
    rows = kernel_trace_diff.compare(A[0], B[0])
    assert [(k, d) for k, _, _, d in rows] == [("gate_up", -10.0), ("route", 1.0), ("shared_down", -1.0)]


def test_kernels_of_one_side_count_zero_on_the_other():
    rows = kernel_trace_diff.compare(graph(1, 5.0, {"p": 5.0}), graph(1, 7.0, {"q": 7.0}))
    assert rows == [("q", 0.0, 7.0, 7.0), ("p", 5.0, 0.0, -5.0)]


def test_cli(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(A))
    (tmp_path / "b.json").write_text(json.dumps(B))
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "kernel_trace_diff.py"), str(tmp_path / "a.json"),
                          str(tmp_path / "b.json"), "--top", "1"], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0] == "graph 2: only in A"
    assert lines[1] == "graph 5: only in B"
    assert lines[2] == "graph 14: nodes 10 / 10, span 100.0 / 90.0 us (-10.0)"
    assert lines[4].split() == ["40.0", "30.0", "-10.0", "gate_up"] and len(lines) == 5
    only = subprocess.run([sys.executable, str(ROOT / "bench" / "kernel_trace_diff.py"), str(tmp_path / "a.json"),
                           str(tmp_path / "b.json"), "--graph", "14"], capture_output=True, text=True, check=True).stdout
    assert only.splitlines()[0].startswith("graph 14:")


def test_cli_names_a_missing_file(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "kernel_trace_diff.py"), str(tmp_path / "no.json"),
                        str(tmp_path / "no.json")], capture_output=True, text=True)
    assert r.returncode != 0 and "no.json" in r.stderr
