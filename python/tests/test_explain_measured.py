"""The 'measured' section explains a memory-bound row above 100% of the bandwidth probe (its data sits in the
last-level cache) instead of leaving an impossible-looking number unexplained."""
import copy

from attnzoo.explain import Context, measured


def test_rows_above_the_bandwidth_probe_carry_their_reason(monkeypatch):
    doc = measured.run_sweep(full=False)
    decode = [r for r in doc["rows"] if r.get("gbps") is not None]
    assert decode, "the sweep has memory-bound rows"
    high = copy.deepcopy(doc)
    row = next(r for r in high["rows"] if r.get("gbps") is not None)
    row["fraction_of_peak"] = 1.3
    for d, expect in ((doc, max(r["fraction_of_peak"] or 0 for r in decode) > 1), (high, True)):
        monkeypatch.setattr(measured, "run_sweep", lambda full, progress=None, d=d: d)
        html = measured.build(Context()).body
        assert ("above 100%: its data fits in the last-level cache" in html) == expect
        assert ("Rows above 100% read less than the" in html) == expect
