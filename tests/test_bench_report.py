"""``python -m jaxemu.bench --from-json``: an earlier run's tables, markdown
and Pareto plot redrawn without measuring (the device machine returns a
bounded number of files; the JSON is the record)."""
import json

import pytest

from jaxemu import bench


def _row(case, ms, err, sgemm_ms=10.0, sgemm_err=1e-6, shape=(1, 64, 64, 64)):
    flop = 2.0 * shape[0] * shape[1] * shape[2] * shape[3]
    return dict(case=case, shape=list(shape), law="normal(0,1)", ms=ms, tflops=flop / ms * 1e-9, error=err,
                speedup_vs_sgemm=sgemm_ms / ms, error_vs_sgemm=err / sgemm_err)


def test_from_json_redraws_a_saved_run(tmp_path, capsys):
    rows = [_row("sgemm", 10.0, 1e-6), _row("fp16x3:cuda", 2.5, 2.5e-7), _row("bf16x3:cuda", 2.0, 4e-6)]
    saved = tmp_path / "bench.json"
    saved.write_text(json.dumps(dict(facts=dict(device="test device", jax="0"), rows=rows)))
    md, png = tmp_path / "bench.md", tmp_path / "pareto.png"
    assert bench.main(["--from-json", str(saved), "--md", str(md), "--plot", str(png),
                       "--plot-shape", "1x64x64x64", "--json", str(tmp_path / "unused.json")]) == 0
    out = capsys.readouterr().out
    # the printed table: each case once, with its ratio to SGEMM as saved
    for case, ratio in (("sgemm", "1.00"), ("fp16x3:cuda", "4.00"), ("bf16x3:cuda", "5.00")):
        line = next(l for l in out.splitlines() if f" {case} " in l)
        assert ratio in line.split(), line
    text = md.read_text()
    assert "fp16x3:cuda" in text and "test device" in text
    assert not (tmp_path / "unused.json").exists()  # nothing measured, nothing written
    pytest.importorskip("matplotlib")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_from_json_names_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        bench.main(["--from-json", str(tmp_path / "nope.json")])
