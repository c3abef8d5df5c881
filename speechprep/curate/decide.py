"""Keep or drop a measured segment: thresholds -> one reason code, tiers for the kept.

Pure functions of a measurements line, its speaker and duplicate facts and
:class:`~.params.DecideParams`: nothing is measured here, so a threshold
change reruns only this. A check whose threshold is ``null`` is off, and a
measure that does not exist for a segment (no units, no ASR confidence) fails
no check. A segment failing several checks is rejected with the first reason
in :data:`ORDER` and lists all of them in ``failed``.
"""

from __future__ import annotations

from typing import Any

from ..core.rejects import reject
from .params import DecideParams

STAGE = "curate"
# every reason code the decisions give, in the order a segment failing several is rejected with
ORDER = (
    "overlap",  # two voices at once (the diarization flagged it `overlap`; ASR kept it)
    "clipped",
    "narrowband",
    "background_music",  # music_prob (the music stage's) over max_music_prob: SNR and DNSMOS would misjudge it
    "low_snr",
    "low_quality",
    "transcript_mismatch",  # a wrong given text explains an odd speaking rate and a low confidence
    "repetitive_text",  # a transcript that loops on a phrase (.texts)
    "wrong_language",  # a transcript in another language than the one declared (.texts)
    "speaking_rate",
    "low_confidence",
    "duplicate",
    "speaker_outlier",
)
TIERS = ("premium", "standard", "basic")
# the measurement fields a kept line and a rejects line carry
MEASURED = (
    "dnsmos_sig",
    "dnsmos_bak",
    "dnsmos_ovrl",
    "dnsmos_p808",
    "lufs",
    "peak_dbfs",
    "clipping_ratio",
    "dc_offset",
    "snr_db",
    "bandwidth_hz",
    "chars_per_s",
    "words_per_s",
    "text_unit_ratio",
    "n_units",
    "pcm_sha256",
    "pitch_mean",
    "pitch_std",
    "pitch_mean_st",
    "pitch_std_st",
    "monotony",
    "reverb",
    "repeated_ngram_share",
    "text_language",
    "declared_language_prob",
    "music_prob",
)
EDGES = ("edge_start_inserted", "edge_start_deleted", "edge_end_inserted", "edge_end_deleted")
# what a rejects line of a verified segment (text: verify) carries too: the ASR line's comparison
VERIFIED = ("text_source", "asr_text", "wer", "cer", *EDGES)


def _below(v: float | None, limit: float | None) -> bool:
    return v is not None and limit is not None and v < limit


def _above(v: float | None, limit: float | None) -> bool:
    return v is not None and limit is not None and v > limit


def failures(
    m: dict[str, Any], speaker_distance: float | None, duplicate_of: str | None, p: DecideParams
) -> list[tuple[str, str]]:
    """``(reason, detail)`` of every check the segment fails, in :data:`ORDER`."""
    out = []
    if m.get("overlap") is True:
        out.append(("overlap", f"two voices at once ({m.get('diarize_speaker')} and {m.get('overlap_speaker')})"))
    if _above(m.get("clipping_ratio"), p.max_clipping_ratio):
        out.append(
            (
                "clipped",
                f"{m['clipping_ratio']:.4%} of samples at full scale (max_clipping_ratio {p.max_clipping_ratio})",
            )
        )
    if _below(m.get("bandwidth_hz"), p.min_bandwidth_hz):
        out.append(("narrowband", f"energy up to {m['bandwidth_hz']:.0f} Hz (min_bandwidth_hz {p.min_bandwidth_hz})"))
    if _above(m.get("music_prob"), p.max_music_prob):
        out.append(("background_music", f"music_prob {m['music_prob']:.3f} (max_music_prob {p.max_music_prob})"))
    if _below(m.get("snr_db"), p.min_snr_db):
        out.append(("low_snr", f"SNR {m['snr_db']:.1f} dB (min_snr_db {p.min_snr_db})"))
    if _below(m.get("dnsmos_ovrl"), p.min_dnsmos_ovrl):
        out.append(("low_quality", f"DNSMOS OVRL {m['dnsmos_ovrl']:.2f} (min_dnsmos_ovrl {p.min_dnsmos_ovrl})"))
    mismatch = transcript_mismatch(m, p)
    if mismatch:
        out.append(("transcript_mismatch", mismatch))
    out += text_failures(m, p)
    rate = m.get("chars_per_s")
    if _below(rate, p.min_chars_per_s) or _above(rate, p.max_chars_per_s):
        out.append(("speaking_rate", f"{rate:.1f} characters/s (allowed {p.min_chars_per_s}..{p.max_chars_per_s})"))
    else:
        r = m.get("text_unit_ratio")
        if _below(r, p.min_text_unit_ratio) or _above(r, p.max_text_unit_ratio):
            out.append(
                (
                    "speaking_rate",
                    f"{r:.2f} characters per S2S unit (allowed {p.min_text_unit_ratio}..{p.max_text_unit_ratio})",
                )
            )
    if _below(m.get("confidence"), p.min_confidence):
        out.append(("low_confidence", f"ASR confidence {m['confidence']:.3f} (min_confidence {p.min_confidence})"))
    if duplicate_of is not None:
        out.append(("duplicate", f"duplicate of {duplicate_of}"))
    if _above(speaker_distance, p.max_speaker_distance):
        out.append(
            (
                "speaker_outlier",
                f"cosine distance {speaker_distance:.3f} to its speaker's centroid "
                f"(max_speaker_distance {p.max_speaker_distance})",
            )
        )
    return out


def text_failures(m: dict[str, Any], p: DecideParams) -> list[tuple[str, str]]:
    """A transcript that loops on itself, or is in another language than the declared one
    (the facts of :func:`.texts.text_facts`; a check whose threshold is null is off)."""
    out = []
    share, words = m.get("repeated_ngram_share"), len((m.get("text") or "").split())
    if words >= p.min_repetition_words and _above(share, p.max_repeated_ngram_share):
        out.append(("repetitive_text", f"{share:.0%} of its word 3-grams repeat (max {p.max_repeated_ngram_share})"))
    prob = m.get("declared_language_prob")
    if _below(prob, p.min_declared_language_prob):
        out.append(
            (
                "wrong_language",
                f"the declared language has p={prob:.4f} in the {m.get('language_judged_on', 'text')} "
                f"(min_declared_language_prob {p.min_declared_language_prob}); most likely "
                f"{(m.get('spoken_language') if m.get('language_judged_on') == 'audio' else m.get('text_language'))!r}",
            )
        )
    return out


def transcript_mismatch(m: dict[str, Any], p: DecideParams) -> str | None:
    """Why a verified line's given text does not match what the ASR model heard (``wer``,
    ``cer``, characters at an edge over their thresholds), or None; a line without ``wer``
    (its text was not verified) fails nothing."""
    if m.get("wer") is None:
        return None
    why = []
    if _above(m["wer"], p.max_wer):
        why.append(f"WER {m['wer']:.3f} (max_wer {p.max_wer})")
    if _above(m.get("cer"), p.max_cer):
        why.append(f"CER {m['cer']:.3f} (max_cer {p.max_cer})")
    edge = max((m.get(k) or 0 for k in EDGES), default=0)
    if _above(edge, p.max_edge_chars):
        worst = max(EDGES, key=lambda k: m.get(k) or 0)
        where, what = worst.split("_")[1], worst.split("_")[2]  # start/end, inserted/deleted
        said = "heard but not in the given text" if what == "inserted" else "in the given text but not heard"
        why.append(f"{edge} characters at the {where} {said} (max_edge_chars {p.max_edge_chars})")
    if not why:
        return None
    return "; ".join(why) + f"; heard {m.get('asr_text')!r}"


def tier(ovrl: float | None, p: DecideParams) -> str:
    """``premium`` / ``standard`` / ``basic`` by DNSMOS OVRL."""
    if ovrl is not None and ovrl >= p.tier_premium:
        return "premium"
    if ovrl is not None and ovrl >= p.tier_standard:
        return "standard"
    return "basic"


def decide(
    m: dict[str, Any],
    speaker: str | None,
    speaker_distance: float | None,
    duplicate: dict[str, Any] | None,
    p: DecideParams,
) -> tuple[bool, dict[str, Any]]:
    """``(True, kept line)`` or ``(False, rejects line)`` for one measurements line ``m``
    (the segment's fields and its measures). ``duplicate``: ``{duplicate_of, kind,
    similarity}`` when the segment duplicates a kept one."""
    extra = {"speaker": speaker, "speaker_distance": speaker_distance}
    failed = failures(m, speaker_distance, duplicate["duplicate_of"] if duplicate else None, p)
    if not failed:
        return True, {**m, **extra, "tier": tier(m.get("dnsmos_ovrl"), p)}
    reason, detail = failed[0]
    line = reject(
        m["id"],
        m.get("audio_filepath"),
        STAGE,
        reason,
        detail,
        failed=[r for r, _ in failed],
        **{k: m[k] for k in ("offset", "duration") if k in m},
    )
    line.update({k: m[k] for k in (*MEASURED, *VERIFIED) if k in m})
    line.update(extra)
    if duplicate:
        line.update(
            duplicate_of=duplicate["duplicate_of"],
            duplicate_kind=duplicate["kind"],
            duplicate_similarity=duplicate["similarity"],
        )
    return False, line
