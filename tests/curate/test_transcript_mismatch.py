"""``transcript_mismatch``: a verified line (text: verify) whose given text the ASR model did not
hear, by WER, CER and the characters at its edges; lines without ``wer`` fail nothing."""

import pytest
from conftest import params
from test_decide import GOOD

from speechprep.curate.decide import ORDER, decide, failures

P = params("decide")
VERIFIED = {**GOOD, "text_source": "given", "asr_text": "hello there", "wer": 0.0, "cer": 0.0,
            **{f"edge_{a}_{b}": 0 for a in ("start", "end") for b in ("inserted", "deleted")}}  # fmt: skip


@pytest.mark.parametrize(
    "change, detail",
    [
        ({"wer": 0.5, "cer": 0.1}, f"WER 0.500 (max_wer {P.max_wer})"),
        ({"wer": 0.2, "cer": 0.3}, f"CER 0.300 (max_cer {P.max_cer})"),
        ({"edge_end_inserted": 9}, "9 characters at the end heard but not in the given text"),
        ({"edge_start_deleted": 12}, "12 characters at the start in the given text but not heard"),
    ],
)
def test_each_threshold_drops_transcript_mismatch(change, detail):
    ok, line = decide({**VERIFIED, **change, "asr_text": "what was heard"}, "spk", 0.1, None, P)
    assert not ok and line["reason"] == "transcript_mismatch" and detail in line["detail"]
    assert "heard 'what was heard'" in line["detail"]
    assert line["wer"] == {**VERIFIED, **change}["wer"] and line["asr_text"] == "what was heard"  # for the report


def test_within_the_thresholds_kept_and_null_turns_a_check_off():
    limits = (P.max_wer, P.max_cer, P.max_edge_chars)
    ok, line = decide({**VERIFIED, "wer": limits[0], "cer": limits[1], "edge_end_deleted": limits[2]}, "s", 0.1,
                      None, P)  # fmt: skip
    assert ok and line["tier"]
    off = params("decide", max_wer=None, max_cer=None, max_edge_chars=None)
    assert failures({**VERIFIED, "wer": 3.0, "cer": 2.0, "edge_end_deleted": 99}, 0.1, None, off) == []
    assert failures({**GOOD, "text_source": "asr"}, 0.1, None, P) == []  # not verified: no check


def test_a_wrong_text_is_dropped_for_it_before_the_rate_and_confidence_it_explains():
    assert ORDER.index("transcript_mismatch") < ORDER.index("speaking_rate") < ORDER.index("low_confidence")
    m = {**VERIFIED, "wer": 1.0, "cer": 0.8, "chars_per_s": 45.0, "confidence": 0.05}
    ok, line = decide(m, "spk", 0.1, None, P)
    assert not ok and line["reason"] == "transcript_mismatch"
    assert line["failed"] == ["transcript_mismatch", "speaking_rate", "low_confidence"]
