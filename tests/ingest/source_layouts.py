"""Corpora in the layouts labs hold them, built from real speech (tests/real_speech.py) for the
source readers' tests and the workflow test: a Kaldi data directory and a Common Voice release.

Real recordings with their human transcripts, from two packages: pocketsphinx-testdata
(BSD-2-Clause: the LibriVox reader's five sentences, the cards speaker's five) and alsa-utils
(GPL-2: one voice naming loudspeaker positions, the text its file names say), plus klettres-data
(GPL-2+: letters spoken in French, the text the letter) for Common Voice; the AN4 utterance
``goforward.raw`` (pocketsphinx-testdata, the text its grammar ``goforward.gram`` says) in a
shorten file. Codecs are real: sox writes the PCM NIST SPHERE files, ffmpeg (libmp3lame) the
Common Voice clips, libsndfile the FLAC; the shorten-compressed SPHERE files come from
tests/ingest/shorten.py (Debian packages no shorten encoder), which ffmpeg decodes sample for
sample (tests/ingest/test_sources_kaldi.py).
"""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf

from tests import real_speech as rs
from tests.ingest import shorten as shn

GAP = 0.5  # s of silence between the utterances of one Kaldi recording


@dataclass
class Truth:
    """What a layout holds: each source id's text, speaker and (for segments) bounds, and the
    reason each bad id must be rejected with."""

    utterances: dict[str, dict] = field(default_factory=dict)
    rejects: dict[str, str] = field(default_factory=dict)
    marker: Path | None = None  # a file a wav.scp command would create if it were ever run
    duplicate: str | None = None  # an id given twice: its first line is read, the later one rejected
    samples: dict[str, np.ndarray] = field(default_factory=dict)  # each SPHERE file's int16 samples


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise RuntimeError(f"{tool} is not installed (scripts/setup.sh installs the tests' codecs)")
    return path


def _joined(utts: list[rs.Utterance], sr: int) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """The utterances one after another with GAP s of silence: samples and each one's bounds."""
    parts, bounds, at = [], [], 0
    gap = np.zeros(int(GAP * sr), np.float32)
    for u in utts:
        x, _ = rs.read(u.path, sr)
        parts += [gap, x.astype(np.float32)]
        at += len(gap)
        bounds.append((round(at / sr, 4), round((at + len(x)) / sr, 4)))
        at += len(x)
    parts.append(gap)
    return np.concatenate(parts), bounds


def alsa_text(u: rs.Utterance) -> str:
    return u.path.stem.replace("_", " ").lower()  # Front_Center.wav says "front center"


def kaldi_dir(dest: Path, bad: bool = False, alsa: int = 3, shorten: bool = False) -> Truth:
    """``dest``: a Kaldi data directory. Recording ``read2ch``, a two-channel NIST SPHERE file (sox):
    the LibriVox sentences on channel 1, the cards on channel 2, each channel a wav.scp
    ``sph2pipe -f wav -p -c N`` line with its segments; the ALSA voice's clips as FLAC behind
    ``flac -c -d -s`` lines, each one segment to the file's end (``-1``). ``text``, ``utt2spk``,
    ``spk2utt``, ``utt2lang``, ``reco2dur``. With ``bad``, one line of each bad kind too.

    With ``shorten``, SPHERE files as LDC's corpora hold them (tests/ingest/shorten.py):
    ``read2ch.sph`` shorten-compressed, the same samples, and recording ``an4-goforward``, the
    AN4 utterance ``goforward.raw`` in a mono shorten SPHERE file behind a
    ``sph2pipe -f wav -p X.sph |`` line, one segment to its end; with ``bad`` too, ``cut.sph``:
    that file cut in the middle of its stream (``cut-1``, rejected ``bad_shorten``).
    ``Truth.samples`` holds each SPHERE file's int16 samples (frames x channels)."""
    _need("sox")
    dest.mkdir(parents=True, exist_ok=True)
    audio = dest / "audio"
    audio.mkdir(exist_ok=True)
    sr = 16000
    lib, lib_bounds = _joined(rs.librivox(), sr)
    cards, card_bounds = _joined(rs.cards(), sr)
    n = max(len(lib), len(cards))
    both = np.stack([np.pad(lib, (0, n - len(lib))), np.pad(cards, (0, n - len(cards)))], 1)
    sf.write(audio / "read2ch.wav", both, sr, subtype="PCM_16")
    sph = audio / "read2ch.sph"
    t = Truth()
    t.samples[str(sph)], _ = sf.read(audio / "read2ch.wav", dtype="int16", always_2d=True)
    if shorten:
        sph.write_bytes(shn.sphere(t.samples[str(sph)], sr))
    else:
        subprocess.run(["sox", str(audio / "read2ch.wav"), str(sph)], check=True)
    (audio / "read2ch.wav").unlink()
    wav = [f"read2ch_a sph2pipe -f wav -p -c 1 {sph} |", f"read2ch_b sph2pipe -f wav -p -c 2 {sph} |"]
    segments, text, utt2spk, reco2dur = [], [], [], [f"read2ch_a {n / sr:.4f}", f"read2ch_b {n / sr:.4f}"]
    for reco, channel, utts, bounds in (
        ("read2ch_a", 0, rs.librivox(), lib_bounds),
        ("read2ch_b", 1, rs.cards(), card_bounds),
    ):
        for u, (a, b) in zip(utts, bounds, strict=True):
            utt = f"{u.speaker}-{u.path.stem[-4:]}"
            segments.append(f"{utt} {reco} {a:.4f} {b:.4f}")
            text.append(f"{utt} {u.text}")
            utt2spk.append(f"{utt} {u.speaker}")
            t.utterances[utt] = {"text": u.text, "speaker": u.speaker, "offset": a, "duration": round(b - a, 4)}
            t.utterances[utt].update(channel=channel, audio_filepath=str(sph))
    for u in rs.alsa_voice()[:alsa]:
        x, rate = sf.read(u.path, dtype="int16")
        flac = audio / f"{u.path.stem}.flac"
        sf.write(flac, x, rate, format="FLAC")
        reco = utt = f"alsa_voice-{u.path.stem}"
        wav.append(f"{reco} flac -c -d -s {flac} |")
        segments.append(f"{utt} {reco} 0 -1")
        text.append(f"{utt} {alsa_text(u)}")
        utt2spk.append(f"{utt} {u.speaker}")
        reco2dur.append(f"{reco} {len(x) / rate:.4f}")
        t.utterances[utt] = {"text": alsa_text(u), "speaker": u.speaker, "offset": 0.0}
        t.utterances[utt].update(duration=round(len(x) / rate, 4), audio_filepath=str(flac))
    if shorten:
        raw_utt = next(p for p in rs.raw_utterances() if p.stem == "goforward")
        said = re.search(r"=\s*(.*?);", (raw_utt.parent / "goforward.gram").read_text(encoding="utf-8")).group(1)
        x = np.fromfile(raw_utt, dtype="<i2")[:, None]
        mono = audio / "an4-goforward.sph"
        mono.write_bytes(shn.sphere(x, sr))
        t.samples[str(mono)] = x
        reco = utt = "an4-goforward"
        wav.append(f"{reco} sph2pipe -f wav -p {mono} |")
        segments.append(f"{utt} {reco} 0 -1")
        text.append(f"{utt} {said}")
        utt2spk.append(f"{utt} an4_speaker")
        t.utterances[utt] = {"text": said, "speaker": "an4_speaker", "offset": 0.0, "duration": len(x) / sr}
        t.utterances[utt].update(audio_filepath=str(mono))
        if bad:
            whole = mono.read_bytes()
            (audio / "cut.sph").write_bytes(whole[: 1024 + (len(whole) - 1024) // 2])  # the header says all
            wav.append(f"cut sph2pipe -f wav -p {audio / 'cut.sph'} |")
            segments.append("cut-1 cut 0 -1")
            text.append(f"cut-1 {said}")
            utt2spk.append("cut-1 an4_speaker")
            t.rejects["cut-1"] = "bad_shorten"
    raw: dict[str, list[bytes]] = {}
    if bad:
        t.marker = dest / "PWNED"
        wav += [
            f"evil touch {t.marker} |",  # would write a file: never run
            f"piped sph2pipe -f wav -p {sph} | sox -t wav - -t wav - |",  # two commands
            f"gone {audio / 'gone.wav'}",
        ]
        segments += [
            "evil-1 evil 0 1",
            "piped-1 piped 0 1",
            "gone-1 gone 0 1",
            f"cards_speaker-past read2ch_b {n / sr - 0.5:.4f} {n / sr + 3:.4f}",  # past reco2dur
            "nowhere-1 norecording 0 1",  # a recording wav.scp lacks
            "inverted-1 read2ch_a 3 2",  # ends before it starts
        ]
        segments.append(segments[0].replace(segments[0].split()[3], "99"))  # the first segment's id again
        text += ["orphan-1 a transcript with no recording"]
        utt2spk += ["cards_speaker-past cards_speaker", "evil-1 x", "piped-1 x", "gone-1 x", "nowhere-1 x"]
        t.rejects.update(
            {
                "evil-1": "command_not_allowed",
                "piped-1": "command_not_allowed",
                "gone-1": "missing",
                "cards_speaker-past": "segment_out_of_range",
                "nowhere-1": "no_recording",
                "inverted-1": "segment_out_of_range",
                "orphan-1": "no_recording",
                "alsa_voice-Front_Left": "bad_line",
                "alsa_voice-Front_Right": "bad_encoding",
                "librivox_reader-0880": "speaker_mismatch",
            }
        )
        first = segments[0].split()[0]
        t.duplicate = first  # its later line is rejected duplicate_id, the first read
        # a line of utt2spk with three fields, a text line in Latin-1, spk2utt disagreeing
        utt2spk = [x + " extra" if x.startswith("alsa_voice-Front_Left ") else x for x in utt2spk]
        raw["text"] = [(x + " café").encode("latin-1") if "Front_Right " in x else x.encode("utf-8") for x in text]
        for k in ("librivox_reader-0880", "alsa_voice-Front_Left", "alsa_voice-Front_Right"):
            t.utterances.pop(k)
    spk2utt: dict[str, list[str]] = {}
    for line in utt2spk:
        utt, spk = line.split()[:2]
        if bad and utt == "librivox_reader-0880":
            spk = "cards_speaker"
        spk2utt.setdefault(spk, []).append(utt)
    files = {
        "wav.scp": wav,
        "segments": segments,
        "text": text,
        "utt2spk": utt2spk,
        "spk2utt": [f"{s} {' '.join(u)}" for s, u in spk2utt.items()],
        "utt2lang": [f"{x.split()[0]} en" for x in segments if not x.startswith(("nowhere", "inverted"))],
        "reco2dur": reco2dur,
    }
    for name, lines in files.items():
        (dest / name).write_bytes(b"".join(x + b"\n" for x in raw.get(name, [y.encode("utf-8") for y in lines])))
    return t


CV_HEADER = ["client_id", "path", "sentence_id", "sentence", "sentence_domain", "up_votes", "down_votes"]
CV_HEADER += ["age", "gender", "accents", "variant", "locale", "segment"]


def common_voice_dir(dest: Path, bad: bool = False) -> Truth:
    """``dest``: a Common Voice release's language directory (``validated.tsv``, ``clips/*.mp3``
    written by ffmpeg, ``clip_durations.tsv``) of the cards speaker's sentences and three French
    klettres letters; a sentence with quotation marks (Common Voice's TSVs are not quoted).
    With ``bad``: a row with a missing column, a duplicate path, a missing clip, a row in Latin-1."""
    _need("ffmpeg")
    clips = dest / "clips"
    clips.mkdir(parents=True, exist_ok=True)
    t = Truth()
    rows, durations = [], []
    speakers = {"cards_speaker": "a" * 64, "klettres_fr": "b" * 64}
    letters = {u.path.stem: u for u in rs.klettres("fr")}  # a-<k>.ogg says the k-th letter (sounds.xml)
    utts = [(u, u.text) for u in rs.cards()] + [(letters[f"a-{k}"], "abc"[k]) for k in range(3)]
    for k, (u, sentence) in enumerate(utts):
        name = f"common_voice_{u.language}_{1000 + k}.mp3"
        subprocess.run(
            ["ffmpeg", "-v", "error", "-y", "-i", str(u.path), "-ar", "32000", "-ac", "1", str(clips / name)],
            check=True,
        )
        if k == 1:
            sentence = f'"{sentence}," he said'  # quotes are text
        gender = "female_feminine" if u.speaker == "klettres_fr" else ""
        rows.append([speakers[u.speaker], name, str(k), sentence, "", "2", "0", "", gender, "", "", u.language, ""])
        info = sf.info(clips / name)
        durations.append([name, str(int(info.frames / info.samplerate * 1000))])
        t.utterances[name] = {"text": sentence, "speaker": speakers[u.speaker], "language": u.language}
        t.utterances[name].update(audio_filepath=str(clips / name))
        if gender:
            t.utterances[name]["gender"] = "female"
    lines = ["\t".join(r).encode("utf-8") for r in rows]
    if bad:
        ok = rows[0]
        lines += [
            "\t".join([*ok[:1], "common_voice_en_short.mp3", *ok[2:-1]]).encode("utf-8"),  # 12 fields
            "\t".join(rows[2]).encode("utf-8"),  # the same path again
            "\t".join([ok[0], "common_voice_en_gone.mp3", *ok[2:]]).encode("utf-8"),
            "\t".join([ok[0], "common_voice_en_latin.mp3", ok[2], "caf\xe9", *ok[4:]]).encode("latin-1"),
        ]
        t.rejects.update(
            {
                "common_voice_en_short.mp3": "bad_line",
                "common_voice_en_gone.mp3": "missing",
                "common_voice_en_latin.mp3": "bad_encoding",
            }
        )
        t.duplicate = rows[2][1]
    (dest / "validated.tsv").write_bytes(b"\n".join(["\t".join(CV_HEADER).encode(), *lines]) + b"\n")
    with open(dest / "clip_durations.tsv", "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, delimiter="\t", quoting=csv.QUOTE_NONE, lineterminator="\n")
        w.writerows([["clip", "duration[ms]"], *durations])
    return t
