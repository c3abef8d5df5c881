"""Model files built from code are the same bytes at every build (speechprep.io.model_archive).

The archive step is tested here on NeMo-style tars (standard library), and for real: each
builder run twice, in two fresh processes of its own environment and two directories (other
temporary names, another hash seed), gives byte-identical files that still load. The demo
ASR model, whose training takes ~80 CPU-s, is saved here untrained; bench/demo/model_archives.py
builds it (and the demo S2S models) twice for real.
"""

import io
import json
import os
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from speechprep.io.model_archive import FIXED_MTIME, repack, save_model
from tests.support import REPO

UUIDS = ("0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210")


def nemo_like(root: Path, out: Path, uuids: tuple[str, str], when: float, mode: int) -> Path:
    """A tar as NeMo's ``save_to`` packs one: a temporary directory with the config, the weights
    and two packed files named ``<uuid4>_<name>`` that the config names ``nemo:<file>``."""
    root.mkdir(parents=True)
    a, b = (f"{u}_{n}" for u, n in zip(uuids, ("tokenizer.vocab", "vocab.txt")))
    (root / "model_config.yaml").write_text(
        f"tokenizer:\n  dir: null\n  spe_tokenizer_vocab: nemo:{a}\n  vocab_path: nemo:{b}\n", encoding="utf-8"
    )
    (root / "model_weights.ckpt").write_bytes(bytes(range(256)) * 40)
    (root / a).write_text("<unk>\t0\n", encoding="utf-8")
    (root / b).write_text("a\nb\n", encoding="utf-8")
    for p in [root, *root.iterdir()]:
        os.utime(p, (when, when))
        p.chmod(mode if p.is_file() else 0o700)
    with tarfile.open(out, "w:") as tar:
        tar.add(root, arcname=".")
    return out


def members(path: Path) -> dict[str, bytes | None]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() if m.isfile() else None for m in tar.getmembers()}


def test_two_packings_of_the_same_files_are_the_same_bytes_and_hold_the_same_files(tmp_path):
    one = nemo_like(tmp_path / "a", tmp_path / "a.nemo", UUIDS, 1.7e9 + 0.25, 0o600)
    two = nemo_like(tmp_path / "b", tmp_path / "b.nemo", UUIDS[::-1], 1.8e9 + 0.5, 0o664)
    assert one.read_bytes() != two.read_bytes()
    for p in (one, two):
        repack(p, p.with_suffix(".packed"))
    packed = one.with_suffix(".packed").read_bytes()
    assert packed == two.with_suffix(".packed").read_bytes()
    with tarfile.open(one.with_suffix(".packed")) as tar:
        infos = tar.getmembers()
    assert [m.name for m in infos] == sorted(m.name for m in infos)
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname, m.pax_headers.get("mtime")) for m in infos} == {
        (FIXED_MTIME, 0, 0, "", "", None)
    }
    assert {m.name: m.mode for m in infos if m.isdir()} == {".": 0o755}
    assert {m.mode for m in infos if m.isfile()} == {0o644}
    # the packed files keep their bytes and their place in the config under their new names
    before, after = members(one), members(one.with_suffix(".packed"))
    assert after["./model_weights.ckpt"] == before["./model_weights.ckpt"]
    config = after["./model_config.yaml"].decode("utf-8")
    for name, data in after.items():
        if name.endswith(("tokenizer.vocab", "vocab.txt")):
            assert f"nemo:{name[2:]}" in config and not name[2:].startswith(UUIDS)
            assert data == before[next(n for n in before if n.endswith(name[-9:]))]
    assert not any(u in config for u in UUIDS)


def test_a_gzipped_archive_is_packed_again_without_its_time_or_name(tmp_path):
    outs = []
    for k in range(2):
        plain = nemo_like(tmp_path / f"d{k}", tmp_path / f"p{k}.nemo", UUIDS, 1.7e9 + k, 0o644)
        gz = tmp_path / f"g{k}.nemo"
        with tarfile.open(gz, "w:gz") as tar:
            for m, data in members(plain).items():
                info = tarfile.TarInfo(m)
                info.mtime = time.time() + k
                info.type = tarfile.REGTYPE if data is not None else tarfile.DIRTYPE
                info.size = len(data or b"")
                tar.addfile(info, io.BytesIO(data) if data is not None else None)
        repack(gz, tmp_path / f"out{k}.nemo")
        outs.append((tmp_path / f"out{k}.nemo").read_bytes())
    assert outs[0] == outs[1] and outs[0][:2] == b"\x1f\x8b" and outs[0][4:8] == bytes(4)  # gzip mtime 0


def test_save_model_names_the_file_after_its_target_and_leaves_nothing_when_the_save_fails(tmp_path):
    out = tmp_path / "models" / "m.bin"
    seen = []
    save_model(out, lambda p: (seen.append(p.name), p.write_bytes(b"weights")))
    assert seen == ["m.bin"] and out.read_bytes() == b"weights"

    def broken(p):
        p.write_bytes(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        save_model(out, broken)
    assert out.read_bytes() == b"weights" and sorted(os.listdir(out.parent)) == ["m.bin"]


def _build_twice(env: str, code: str, tmp_path: Path) -> list[dict]:
    """``code`` run by ``.venvs/<env>`` in two fresh processes, each with its own output
    directory (``OUT``) and hash seed: each run's JSON (its last line)."""
    python = REPO / ".venvs" / env / "bin" / "python"
    if not python.is_file():
        pytest.skip(f"no .venvs/{env}: scripts/setup.sh {env}")
    runs = []
    for k, seed in enumerate(("1", "2")):
        out = tmp_path / f"build{k}" / "deep" if k else tmp_path / f"build{k}"
        env_vars = {**os.environ, "PYTHONHASHSEED": seed, "OUT": str(out), "PYTHONPATH": str(REPO)}
        done = subprocess.run(
            [str(python), "-c", code], cwd=REPO, env=env_vars, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr[-3000:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return runs


# the builds' code (run by _build_twice) prints this of its files: {name: sha256}
DIGESTS = "{p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}"


NEMO_BUILDS = f"""
import hashlib, json, os, sys
from pathlib import Path
sys.path.insert(0, "tests/asr")
import nemo_models
from nemo.collections.asr.models import ASRModel, EncDecCTCModel, EncDecSpeakerLabelModel, SortformerEncLabelModel
from speechprep.demo import asr_model
from speechprep.io.model_archive import save_nemo
from speechprep.models import speaker_nemo, speaker_onnx
out = Path(os.environ["OUT"])
paths = [nemo_models.build(kind, out) for kind in ("ctc", "canary")]
paths.append(save_nemo(EncDecCTCModel(cfg=asr_model.model_config()).eval(), out / "demo_asr_untrained.nemo"))
paths.append(speaker_nemo.build_one("titanet", out / "titanet.nemo"))
paths.append(speaker_nemo.one_voice_sortformer(out / "one_voice.nemo"))
paths += speaker_onnx.build_tiny(out).values()
restored = [type(ASRModel.restore_from(str(p), map_location="cpu")).__name__ for p in paths[:3]]
restored.append(type(EncDecSpeakerLabelModel.restore_from(str(paths[3]), map_location="cpu")).__name__)
restored.append(type(SortformerEncLabelModel.restore_from(str(paths[4]), map_location="cpu")).__name__)
print(json.dumps({{"files": {DIGESTS}, "restored": restored}}))
"""


@pytest.mark.slow
def test_tiny_nemo_and_onnx_models_are_the_same_bytes_at_every_build_and_restore(tmp_path):
    one, two = _build_twice("asr", NEMO_BUILDS, tmp_path)
    assert one["files"] == two["files"], "a model built twice differs"
    assert len(one["files"]) == 7
    assert one["restored"] == [
        "EncDecCTCModelBPE",
        "EncDecMultiTaskModel",
        "EncDecCTCModel",
        "EncDecSpeakerLabelModel",
        "SortformerEncLabelModel",
    ]


S2S_BUILDS = f"""
import hashlib, json, os
from pathlib import Path
from speechprep.demo import s2s_models
from speechprep.s2s import fairseq_legacy
from speechprep.s2s.models import load_kmeans_centers, load_vocoder
from tests.support import DEMO
paths = [Path(p) for p in s2s_models.build_demo(DEMO / "truth.json", Path(os.environ["OUT"])).values()]
loaded = [type(fairseq_legacy.load(paths[0])[0]).__name__, load_kmeans_centers(paths[1]).shape[0]]
loaded.append(type(load_vocoder(str(paths[2]), str(paths[3]), "cpu")[0]).__name__)
print(json.dumps({{"files": {DIGESTS}, "loaded": loaded}}))
"""


@pytest.mark.slow
def test_the_demo_s2s_models_are_the_same_bytes_at_every_build_and_load(tmp_path):
    one, two = _build_twice("s2s", S2S_BUILDS, tmp_path)
    assert one["files"] == two["files"], "a demo S2S model built twice differs"
    assert sorted(one["files"]) == ["demo_hubert_legacy.pt", "demo_km.bin", "demo_vocoder.json", "demo_vocoder.pt"]
    assert one["loaded"] == ["HubertModel", 50, "CodeHiFiGANVocoder"]


def test_the_builders_write_through_the_one_writer():
    """No model builder renames a file of its own: each saves through ``save_model``/``save_nemo``
    (``save_to``, ``torch.save`` and ``joblib.dump`` only in the function it hands the writer)."""
    builders = [*(REPO / "speechprep" / "models").glob("*.py"), *(REPO / "speechprep" / "demo").glob("*.py")]
    builders.append(REPO / "tests" / "asr" / "nemo_models.py")
    direct = []
    for path in builders:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            saves = any(s in line for s in (".save_to(", "torch.save(", "joblib.dump("))
            if "os.replace(" in line or (saves and "lambda path" not in line):
                direct.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not direct, direct
