"""A long recording aligned to its text, cut into utterances with an ``align_score``.

What a manifest line of a transcribed dataset becomes when its recording is longer
than ``vad.max_segment``:

1. **Text** (:func:`text_units`): split into sentences (nemo-text-processing's
   splitter where the language has grammars, which knows "Mr." and "a.m."; else
   at ``. ! ?``; always at blank lines), each sentence into clauses at ``, ; :``
   (a clause of fewer than ``MIN_CLAUSE_WORDS`` words joins the next). Each
   clause is put in spoken form by the TTS normaliser (digits, abbreviations,
   symbols as said; a clause holding none of them is its own spoken form and
   skips the grammars, :func:`~.compare.needs_grammars`) and spelt in the
   model's vocabulary. Clauses are the units
   aligned; an utterance is a sentence, or a part of one cut between clauses.
2. **Log-probabilities** (:mod:`.ctc`): chunked, stitched, bounded memory.
3. **Alignment** (:func:`align_units`) with the ``ctc-segmentation`` package
   (Kürzinger et al. 2020; the aligner NeMo's CTC-segmentation tool uses), in
   blocks: a block of text (about a third of ``window_seconds`` of speech at the
   recording's own token rate) is aligned within ``window_seconds`` of audio
   from where the previous block's accepted text ended. ctc-segmentation skips
   audio before and after the text for free, so audio the text lacks between
   blocks costs nothing. Its table is ``window frames x block tokens`` float32,
   whatever the recording's length. Within a block, while the worst unit scores
   under ``min_align_score``, that unit is taken out and the block aligned again:
   text nobody read (a preface) leaves the text instead of pulling the units
   around it onto the wrong audio; then each unit taken out is tried again in
   its place and kept if every unit still scores above the threshold (the
   good sentences the preface had pushed off their audio come back). The last
   third of a block's units is aligned again at the start of the next block
   (the window may have cut it off). Between two units the path sits in a gap
   state (a filler column of constant log-probability ``gap_logprob``, or the
   blank's where that is likelier): speech the text lacks (an announcement)
   costs less there than held in a neighbouring sentence's first or last
   token, so it stays out of both. A run of units that still failed is aligned
   once more alone, in the audio between the aligned units around it.
4. **Spans and scores**: a unit spans from the frame where the model is surest
   of its first token to the one where it is surest of its last (within the
   frames the path holds them: the path may hold a first or last token over
   audio the text lacks, which must not count as the unit's; where it holds a
   token inside the unit over ``min_untranscribed`` of heard speech, the span is
   the side of that hold with more of the unit's tokens). Its score is
   ctc-segmentation's confidence over that span: the minimum, over windows of
   ``score_seconds``, of the mean log-probability of the aligned path (0 is
   certain; lower is worse); an utterance's ``align_score`` is the lowest of
   its units'.
5. **Utterances** (:func:`utterances`): a sentence whose units all aligned is one
   utterance from its first token to its last (plus ``start_pad``/``end_pad``),
   cut at the largest pause between its clauses while longer than
   ``max_segment``. Rejects: a sentence holding a unit that did not align
   (``misaligned``: text the audio lacks, or audio too unlike the text), a
   clause longer than ``max_segment`` (``too_long``), a sentence with nothing the
   model can spell (``misaligned``); and every stretch outside the aligned
   utterances (and half of ``min_untranscribed`` away from them) where the model
   hears speech for ``min_untranscribed`` seconds or more (``misaligned``: audio
   the text lacks, with what the model heard).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.language import base_language
from ..io.audio import grid_span
from ..text.normalize import TextNormalizer
from ..text.spoken import SpokenNormalizer
from .compare import needs_grammars
from .ctc import CtcHead, LogProbs
from .params import AlignParams

log = logging.getLogger("speechprep.asr")

MIN_CLAUSE_WORDS = 3
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"'”’)\]]*\s+")
_CLAUSE_END = re.compile(r"(?<=[,;:])\s+")


@dataclass
class Unit:
    """A clause: its written text, its sentence, its spoken form and tokens; after alignment
    its frames ``[start, end)`` and score, or ``failed``."""

    text: str
    sentence: int
    spoken: str
    ids: list[int]
    start: int = -1
    end: int = -1
    score: float | None = None
    failed: bool = False


def split_sentences(text: str, language: str | None, spoken: SpokenNormalizer | None) -> list[str]:
    """Sentences of a (long) text: paragraphs first, then NeMo's splitter or the plain rule."""
    lang = base_language(language)
    splitter = None
    if spoken is not None and lang in spoken.grammars:
        splitter = spoken.normalizer(lang).split_text_into_sentences
    out = []
    for para in re.split(r"\n\s*\n", text):
        para = TextNormalizer.clean(para)
        if not para:
            continue
        parts = splitter(para) if splitter else _SENTENCE_END.split(para)
        out += [s.strip() for s in parts if s.strip()]
    return out


def split_clauses(sentence: str) -> list[str]:
    """A sentence's clauses, each of at least ``MIN_CLAUSE_WORDS`` words (but the last)."""
    out: list[str] = []
    carry = ""
    for c in _CLAUSE_END.split(sentence):
        c = f"{carry} {c}".strip()
        if len(c.split()) < MIN_CLAUSE_WORDS:
            carry = c
        else:
            out.append(c)
            carry = ""
    if carry:
        if out:
            out[-1] = f"{out[-1]} {carry}"
        else:
            out.append(carry)
    return out


def text_units(
    text: str, head: CtcHead, language: str | None, spoken: SpokenNormalizer | None
) -> tuple[list[str], list[Unit]]:
    """``(sentences, units)``: the written sentences and their clauses in spoken form, spelt."""
    sentences = split_sentences(text, language, spoken)
    units = []
    for k, sent in enumerate(sentences):
        for clause in split_clauses(sent):
            # a clause without digits, symbols or abbreviations is its own spoken form (compare.needs_grammars)
            said = spoken(clause, language)[0] if spoken is not None and needs_grammars(clause) else clause
            ids, _ = head.encode(said)
            units.append(Unit(clause, k, said, ids))
    return sentences, units


def _ctc_segment(lpz: np.ndarray, blank: int, token_lists: list[np.ndarray], score_frames: int, gap: float, hold: int):
    """ctc-segmentation of token lists (column indices) in ``lpz``: per list ``(start, end, score)``.

    Between two units the path sits in a gap state of its own (an extra column of constant
    log-probability ``gap``, or the blank's where that is likelier), not in the blank: speech the
    text lacks between two sentences costs ``gap`` a frame there, less than holding a neighbour's
    token over it would, so it stays out of both sentences (a filler model, as keyword spotters use)."""
    import ctc_segmentation as cs

    lpz = np.concatenate([lpz, np.maximum(lpz[:, blank : blank + 1], np.float32(gap))], axis=1)
    sep = lpz.shape[1] - 1
    config = cs.CtcSegmentationParameters(
        char_list=[str(i) for i in range(lpz.shape[1])],
        blank=blank,
        index_duration=1.0,  # timings in frames
        min_window_size=lpz.shape[0],  # the whole window: no band that could miss the path
        max_window_size=lpz.shape[0] + 1,
        score_min_mean_over_L=score_frames,
    )
    seq, begins = [-1], []
    for tokens in token_lists:
        begins.append(len(seq))
        seq += [sep, *(int(t) for t in tokens)]
    begins.append(len(seq))
    seq.append(sep)
    gt = np.array(seq, dtype=np.int64).reshape(-1, 1)
    timings, char_probs, _ = cs.ctc_segmentation(config, lpz, gt)
    entry = np.round(timings).astype(np.int64)  # frame where each ground-truth state is entered
    speech = np.argmax(lpz[:, :sep], axis=1) != blank
    out = []
    for k, tokens in enumerate(token_lists):
        first, last, sep_k = begins[k] + 1, begins[k + 1] - 1, begins[k + 1]
        lo, hi = _held_apart(entry, speech, first, last, hold)
        a = _peak(lpz, int(tokens[lo - first]), entry[lo], entry[lo + 1] if lo < last else entry[sep_k])
        end = entry[hi + 1] if hi < last else entry[sep_k]
        b = _peak(lpz, int(tokens[hi - first]), entry[hi], end if hi == last else min(end, entry[hi] + hold)) + 1
        b = max(a + 1, b)
        out.append((a, b, window_score(char_probs[a:b], score_frames)))
    return out


def _held_apart(entry: np.ndarray, speech: np.ndarray, first: int, last: int, hold: int) -> tuple[int, int]:
    """The tokens ``[lo, hi]`` of a unit (path states ``first..last``) its span holds: all of them,
    unless the path holds one of them (not the last) for more than ``hold`` frames over which the
    model hears ``hold`` frames of speech: audio the text lacks inside the unit, which a weak
    model may hear as one token of it, said over and over. Then the span is the side of that
    hold with more of the unit's tokens (the other side's few tokens are where the path found
    room for them, not where they were said); a pause, where the model hears no speech, is kept."""
    held = np.diff(entry[first : last + 1])
    if not len(held) or held.max() <= hold:
        return first, last
    j = int(np.argmax(held))
    if int(speech[entry[first + j] : entry[first + j + 1]].sum()) < hold:
        return first, last
    return (first, first + j) if j + 1 >= len(held) - j else (first + j + 1, last)


def _peak(lpz: np.ndarray, column: int, a: int, b: int) -> int:
    """The frame in ``[a, b)`` where the model is surest of ``column``: where a token the path
    holds for several frames is heard (the path may hold a unit's first or last token over audio
    the text lacks; that stretch is neither the unit's span nor in its score)."""
    if b <= a + 1:
        return int(a)
    return int(a + np.argmax(lpz[a:b, column]))


def window_score(path_probs: np.ndarray, n: int) -> float:
    """ctc-segmentation's confidence: the minimum over windows of ``n`` frames of the mean."""
    if len(path_probs) == 0:
        return -1e10
    if len(path_probs) <= n:
        return float(path_probs.mean())
    c = np.concatenate([[0.0], np.cumsum(path_probs, dtype=np.float64)])
    return float(((c[n:] - c[:-n]) / n).min())


@dataclass
class _Block:
    """The aligner's state: where the next block's audio starts, which unit is next."""

    t0: int = 0
    next_unit: int = 0
    rounds: int = 0
    blocks: int = 0
    table_bytes: int = 0
    rate: float = 0.0  # tokens per frame over the whole recording
    log: list = field(default_factory=list)


def _block_end(units: list[Unit], i: int, frames: float, rate: float) -> int:
    """The first unit after a block starting at ``i`` holding about ``frames`` of speech."""
    want = max(1.0, rate * frames)
    n = 0
    j = i
    while j < len(units) and (j == i or n + len(units[j].ids) <= want):
        n += len(units[j].ids)
        j += 1
    return j


def _align_block(lp: LogProbs, units: list[Unit], block: list[int], t0: int, t1: int, p: AlignParams, st: _Block):
    """Align ``block`` (unit indices) in frames ``[t0, t1)``: while the worst unit scores under the
    threshold it is taken out and the rest aligned again; then each unit taken out gets a second
    chance, in text order, in passes while one comes back (put back if every unit then scores above
    the threshold: a good unit that text nobody read had pushed off its audio comes back). Returns
    the units kept and taken out."""
    lpz = lp.lpz[t0:t1]
    col = {int(c): k for k, c in enumerate(lp.columns)}
    score_frames = max(1, int(round(p.score_seconds / lp.frame_seconds)))

    def fits(members: list[int]) -> bool:
        return sum(len(units[u].ids) + 1 for u in members) + 1 <= len(lpz)

    def attempt(members: list[int]) -> dict[int, tuple[int, int, float]]:
        if not members:
            return {}
        tokens = [np.array([col[i] for i in units[u].ids], dtype=np.int64) for u in members]
        st.rounds += 1
        st.table_bytes = max(st.table_bytes, len(lpz) * (sum(len(t) + 1 for t in tokens) + 1) * 4)
        hold = max(1, int(round(p.min_untranscribed / lp.frame_seconds)))
        spans = _ctc_segment(lpz, lp.blank_column, tokens, score_frames, p.gap_logprob, hold)
        return dict(zip(members, spans, strict=True))

    kept, out = list(block), []
    while kept and not fits(kept):  # more text than frames: the last units wait for the next block
        out.append(kept.pop())
    spans = attempt(kept)
    while kept:
        worst = min(kept, key=lambda u: spans[u][2])
        if spans[worst][2] >= p.min_align_score:
            break
        kept.remove(worst)
        out.append(worst)
        units[worst].score = spans[worst][2]  # what it scored when taken out (the reject's detail)
        spans = attempt(kept)
    restored = True
    while restored:  # again while one came back: a unit may fit only once another is back
        restored = False
        for u in sorted(out):
            trial = sorted([*kept, u])
            if fits(trial):
                again = attempt(trial)
                if min(v[2] for v in again.values()) >= p.min_align_score:
                    kept, spans, restored = trial, again, True
                    out.remove(u)
    for u, (s, e, score) in spans.items():
        units[u].start, units[u].end, units[u].score = t0 + s, t0 + e, score
    return kept, out


def align_units(lp: LogProbs, units: list[Unit], p: AlignParams) -> dict[str, Any]:
    """Align every unit with a token (module docstring, step 3); sets their frames, scores and
    ``failed``. Returns the aligner's figures (blocks, alignment rounds, largest table)."""
    todo = [k for k, u in enumerate(units) if u.ids]
    for u in units:
        u.failed = not u.ids
    total_frames = lp.lpz.shape[0]
    window = max(1, int(round(p.window_seconds / lp.frame_seconds)))
    st = _Block(rate=sum(len(units[k].ids) for k in todo) / max(1, total_frames))
    i = 0
    while i < len(todo):
        j = _block_end([units[k] for k in todo], i, window / 3, st.rate)
        block = todo[i:j]
        t1 = min(total_frames, st.t0 + window)
        last = j == len(todo)
        accept = len(block) if last else max(1, -(-2 * len(block) // 3))
        kept, out = _align_block(lp, units, block, st.t0, t1, p, st)
        st.blocks += 1
        accepted = [u for u in kept if u in set(block[:accept])]
        done = block.index(accepted[-1]) + 1 if accepted else accept  # the rest is aligned again
        for u in block[:done]:
            units[u].failed = u in out
        last_ok = accepted[-1] if accepted else None
        log.debug("block %d: frames %d-%d, units %d-%d, out %s, accepted to %s", st.blocks, st.t0, t1, block[0],
                  block[-1], sorted(out), last_ok)  # fmt: skip
        if accepted:
            st.t0 = units[accepted[-1]].end
        i += done
    _second_pass(lp, units, todo, window, p, st)
    return {"blocks": st.blocks, "rounds": st.rounds, "table_bytes": st.table_bytes}


def _second_pass(lp: LogProbs, units: list[Unit], todo: list[int], window: int, p: AlignParams, st: _Block):
    """Each run of units that did not align, aligned again alone in the audio between the aligned
    units around it (at most ``window`` frames of it): audio the text lacks just before a sentence
    (an announcement) pulled the sentence's start onto it in the block's alignment; alone in its
    gap, ctc-segmentation skips that audio for free. Text nobody read finds no room and stays out."""
    k = 0
    while k < len(todo):
        if not units[todo[k]].failed:
            k += 1
            continue
        j = k
        while j < len(todo) and units[todo[j]].failed:
            j += 1
        a = units[todo[k - 1]].end if k > 0 else 0
        b = units[todo[j]].start if j < len(todo) else lp.lpz.shape[0]
        run = todo[k:j]
        if b - a > 1:
            kept, _ = _align_block(lp, units, run, a, min(b, a + window), p, st)
            for u in kept:
                units[u].failed = False
        k = j


def _cut(units: list[Unit], max_frames: float) -> list[list[Unit]] | None:
    """A sentence's aligned units in pieces of at most ``max_frames``, cut at the largest pause
    between units; None when one unit alone is longer."""
    if units[-1].end - units[0].start <= max_frames:
        return [units]
    if len(units) == 1:
        return None
    k = max(range(1, len(units)), key=lambda k: units[k].start - units[k - 1].end)
    left, right = _cut(units[:k], max_frames), _cut(units[k:], max_frames)
    return None if left is None or right is None else left + right


def _reject(rec: dict, uid: str, reason: str, detail: str, **extra) -> dict[str, Any]:
    return {"id": uid, "file_id": rec["id"], "audio_filepath": rec["audio_filepath"], "reason": reason,
            "detail": detail, **extra}  # fmt: skip


def utterances(
    rec: dict, sentences: list[str], units: list[Unit], lp: LogProbs, p: AlignParams
) -> tuple[list[dict], list[dict]]:
    """``(utterance lines, reject lines)`` of a recording's aligned units (module docstring, step 5)."""
    fs = lp.frame_seconds
    lines, rejects = [], []
    for k, sent in enumerate(sentences):
        own = [u for u in units if u.sentence == k]
        uid = f"{rec['id']}_{k:04d}"
        bad = [u for u in own if u.failed and u.ids]
        if bad or not any(u.ids for u in own):
            why = "; ".join(f"{u.text!r} (score {_r(u.score)})" for u in bad) or "nothing the model can spell"
            rejects.append(_reject(rec, uid, "misaligned", f"not aligned to the audio: {why}", text=sent))
            continue
        pieces = _cut([u for u in own if u.ids], p.max_segment / fs)
        if pieces is None:
            rejects.append(_reject(rec, uid, "too_long", f"a clause is longer than max_segment {p.max_segment} s",
                                   text=sent, offset=round(own[0].start * fs, 3)))  # fmt: skip
            continue
        for n, piece in enumerate(pieces):
            a, b = piece[0].start, piece[-1].end
            start, length = grid_span(a * fs - p.start_pad, b * fs + p.end_pad, (0.0, lp.duration))
            lines.append({
                "id": uid if len(pieces) == 1 else f"{uid}_{n}",
                "file_id": rec["id"],
                "audio_filepath": rec["audio_filepath"],
                "offset": start,
                "duration": length,
                "text": sent if len(pieces) == 1 else " ".join(u.text for u in piece),
                "text_source": "given",
                "align_score": _r(min(u.score for u in piece)),
            })  # fmt: skip
    return lines, rejects + untranscribed(rec, lines, lp, p)


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 3)


def untranscribed(rec: dict, lines: list[dict], lp: LogProbs, p: AlignParams) -> list[dict]:
    """Stretches where the model hears ``min_untranscribed`` s of speech, farther than half of that
    from every utterance (an utterance's span runs from its first token's peak to its last's: the
    sounds around those peaks are its own, not audio the text lacks)."""
    fs = lp.frame_seconds
    guard = p.min_untranscribed / 2
    covered = np.zeros(len(lp.greedy), dtype=bool)
    for line in lines:
        a, b = line["offset"] - guard, line["offset"] + line["duration"] + guard
        covered[max(0, int(a / fs)) : max(0, int(np.ceil(b / fs)))] = True
    heard = (lp.greedy != lp.blank_id) & ~covered
    out = []
    edges = np.flatnonzero(np.diff(np.concatenate([[0], (~covered).astype(np.int8), [0]])))
    for a, b in zip(edges[::2], edges[1::2], strict=True):
        frames = np.flatnonzero(heard[a:b])
        if len(frames) == 0 or (frames[-1] - frames[0] + 1) * fs < p.min_untranscribed:
            continue
        s, e = a + frames[0], a + frames[-1] + 1
        said = _collapse(lp.greedy[s:e], lp.blank_id)
        detail = f"audio the text lacks: the model hears {len(said)} tokens here"
        where = {"offset": round(float(s * fs), 3), "duration": round(float((e - s) * fs), 3)}
        out.append(_reject(rec, f"{rec['id']}_audio_{len(out):04d}", "misaligned", detail, **where, heard_ids=said))
    return out


def _collapse(greedy: np.ndarray, blank: int) -> list[int]:
    """CTC's greedy output: repeats merged, blanks dropped."""
    keep = np.concatenate([[True], greedy[1:] != greedy[:-1]]) & (greedy != blank)
    return [int(x) for x in greedy[keep]]


def align_recording(
    rec: dict, text: str, head: CtcHead, p: AlignParams, spoken: SpokenNormalizer | None, language: str | None
) -> dict[str, Any]:
    """A recording (``rec``: ``id``, ``audio_filepath``; ``offset``, ``duration`` and ``channel``
    where it is a stretch of its file, or one channel of it: a source's utterance) and its text:
    utterance lines, reject lines (their times on the file's clock, as every stage reads them)
    and the figures (``frames``, ``blocks``, ``rounds``, ``table_bytes``, ``lpz_bytes``)."""
    sentences, units = text_units(text, head, language, spoken)
    used = {i for u in units for i in u.ids}
    base = float(rec.get("offset") or 0.0)
    read = {"offset": base, "duration": rec.get("duration"), "channel": rec.get("channel")}
    lp = head.log_probs(rec["audio_filepath"], used, p.chunk_seconds, p.context_seconds, **read)
    figures = align_units(lp, units, p)
    lines, rejects = utterances(rec, sentences, units, lp, p)
    for x in (lines + rejects) if base else ():
        if "offset" in x:
            x["offset"] = round(x["offset"] + base, 4)
    for r in rejects:
        if "heard_ids" in r:
            r["heard"] = head.decode(r.pop("heard_ids"))
    figures.update(
        frames=int(lp.lpz.shape[0]),
        frame_seconds=lp.frame_seconds,
        lpz_bytes=int(lp.lpz.nbytes + lp.greedy.nbytes),
        sentences=len(sentences),
        units=len(units),
    )
    log.info("%s: %d utterances, %d rejects from %d sentences; %s", rec["id"], len(lines), len(rejects),
             len(sentences), figures)  # fmt: skip
    return {"utterances": lines, "rejects": rejects, "figures": figures}
