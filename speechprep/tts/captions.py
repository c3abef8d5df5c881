"""The annotations a TTS manifest line carries and its caption (``tts.captions``).

Curation measures each segment's pitch, monotony and reverberation once (the annotate
job, ``speechprep.curate.annotate``; the SNR in its measure job) and bins them per dataset (``curate/summary.json``,
``annotations.edges``); the manifest job adds the speaking rate (phonemes per second
when ``tts.phonemes`` is on, else characters without spaces per second; its bins from
the manifest's own segments, written in ``stats.json``) and a DataSpeech-style
``description``: each measure's bin picks a word of ``tts.captions.words``, and the
template joins them. ``{who}`` comes from the segment's ``gender``, only where the input
manifest gave one; the pitch word of such a segment comes from its gender's bins
(``annotations.by_gender``), as DataSpeech bins pitch per gender.

A corpus that grows keeps its captions: the edges a run used are recorded
(``tts/.caption_edges.json``, not a rule's output, so it outlives a rerun) and a later run
bins with them (:meth:`Captions.hold`), as the speakers keep their ids; a measure or gender
the record has no edges for takes this run's. Deleting the record bins afresh.
"""

from __future__ import annotations

import json
import string
from collections import Counter
from pathlib import Path
from typing import Any

from ..core.bins import bin_edges, bin_of
from ..errors import UsageError
from ..io.jsonio import write_text_if_changed

# what a kept curation line gives the manifest line
CARRIED = ("gender", "pitch_mean", "pitch_std", "pitch_mean_st", "pitch_std_st", "monotony", "reverb", "snr_db")
# a caption word -> the measure whose bin picks it
BINNED = {"pitch": "pitch_mean", "monotony": "monotony", "reverb": "reverb", "snr": "snr_db"}
NOT_PHONEMES = frozenset("ˈˌːˑ") | frozenset(" \t\n")  # stress, length, gaps: not sounds of their own


def speaking_rate(line: dict) -> float | None:
    """Phonemes per second of the segment's ``phonemes`` (without stress and length marks),
    else characters without spaces per second of its ``text_normalized``/``text``."""
    duration = float(line.get("duration") or 0.0)
    if duration <= 0:
        return None
    if line.get("phonemes") is not None:
        n = sum(1 for c in line["phonemes"] if c not in NOT_PHONEMES)
        return n / duration if n else None  # kept without phonemes (tts.no_phonemes): not measured
    text = line.get("text_normalized") or line.get("text") or ""
    return sum(1 for c in text if not c.isspace()) / duration


class Captions:
    """``description`` of each line from the dataset's bin edges (``edges``: measure ->
    inner edges, the speaking rate's added by :meth:`fit_rate`) and ``tts.captions``."""

    def __init__(
        self,
        config: dict[str, Any],
        bins: int,
        edges: dict[str, list[float] | None],
        by_gender: dict[str, dict[str, list[float] | None]] | None = None,
    ):
        self.template, self.who, self.words = config["template"], config["who"], config["words"]
        for name, words in self.words.items():
            if len(words) != bins:
                raise UsageError(
                    f"tts.captions.words.{name} has {len(words)} words for curate.annotation_bins {bins}: "
                    "give one word per bin, lowest first"
                )
        named = {f for _, f, _, _ in string.Formatter().parse(self.template) if f is not None}
        if not named <= {"who", *self.words}:
            raise UsageError(
                f"tts.captions.template names {sorted(named - {'who', *self.words})}: it may name "
                f"{{who}} and the measures given words in tts.captions.words ({', '.join(self.words)})"
            )
        self.bins = bins
        self.edges = {name: edges.get(measure) for name, measure in BINNED.items()}
        # the pitch words of a segment whose gender is given: from its gender's edges
        pitch = BINNED["pitch"]
        self.pitch_by_gender = {g: e[pitch] for g, e in (by_gender or {}).items() if e.get(pitch)}
        self.counts: Counter = Counter()

    def fit_rate(self, lines: list[dict]) -> None:
        self.edges["speaking_rate"] = bin_edges([x.get("speaking_rate") for x in lines], self.bins)

    def hold(self, record: str | Path) -> None:
        """Bin with the edges ``record`` kept from an earlier run of as many bins (module
        docstring); those it lacks are this run's; then record the edges used."""
        record = Path(record)
        old = json.loads(record.read_text(encoding="utf-8")) if record.exists() else {}
        if old.get("bins") == self.bins:
            self.edges |= {k: e for k, e in old.get("edges", {}).items() if k in self.edges and e is not None}
            self.pitch_by_gender |= {g: e for g, e in old.get("pitch_by_gender", {}).items() if e is not None}
        used = {"bins": self.bins, "edges": self.edges, "pitch_by_gender": self.pitch_by_gender}
        record.parent.mkdir(parents=True, exist_ok=True)
        write_text_if_changed(record, json.dumps(used, sort_keys=True, ensure_ascii=False) + "\n")

    def __call__(self, line: dict) -> str | None:
        """The caption of ``line``; ``None`` when a word it needs has no value (no voiced
        frame for the pitch, say), counted by the missing word."""
        value = {**{name: line.get(m) for name, m in BINNED.items()}, "speaking_rate": line.get("speaking_rate")}
        fields = {"who": self.who.get(line.get("gender") or "unknown", self.who["unknown"])}
        for name, words in self.words.items():
            edges = self.edges.get(name)
            if name == "pitch":
                edges = self.pitch_by_gender.get(line.get("gender") or "", edges)
            b = bin_of(value.get(name), edges)
            if b is None:
                self.counts[f"no_{name}"] += 1
                return None
            fields[name] = words[b]
        self.counts["described"] += 1
        return self.template.format(**fields)

    def stats(self) -> dict[str, Any]:
        counts = dict(sorted(self.counts.items()))
        return {"bins": self.bins, "edges": self.edges, "pitch_by_gender": self.pitch_by_gender, "counts": counts}
