"""The loading options at the boundary: an adapter folder whose
adapter_config.json has the wrong shape or whose weights are corrupt or truncated, an option a
model's source ignores (``--model-arg revision=`` on a folder, ``--adapter-mode`` without an
adapter) and two revisions that disagree: one line, exit 2, before any run folder."""

from __future__ import annotations

import json
import shutil
import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from tiny_models import tiny_folder  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.models import load_options as lo  # noqa: E402
from whitebox_eval.models.load_check import configure  # noqa: E402


@pytest.fixture(autouse=True)
def plain_load():
    lo.reset()
    yield
    lo.reset()


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return tiny_folder("llama", tmp_path_factory.mktemp("base") / "tiny")


@pytest.fixture(scope="module")
def adapter(base, tmp_path_factory) -> Path:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    out = tmp_path_factory.mktemp("lora") / "lora"
    get_peft_model(AutoModelForCausalLM.from_pretrained(base),
                   LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"])).save_pretrained(out)
    return out


def _copy(adapter: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(adapter, tmp_path / "bad"))


def _header(path: Path) -> tuple[int, dict, bytes]:
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    return n, json.loads(data[8:8 + n]), data[8 + n:]


def _write(path: Path, header, body: bytes) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + body)


@pytest.mark.parametrize("text, says", [
    ("[1, 2]", "holds a list, not the mapping"),
    ('"lora"', "holds a str, not the mapping"),
    ("3", "holds a int, not the mapping"),
    ("{", "does not read as JSON"),
])
def test_an_adapter_config_of_the_wrong_shape_is_one_line(adapter, base, tmp_path, text, says):
    bad = _copy(adapter, tmp_path)
    (bad / "adapter_config.json").write_text(text)
    with pytest.raises(WhiteboxError, match=says):
        configure(str(base), adapter=str(bad))


def _truncated(path):
    path.write_bytes(path.read_bytes()[:-5])


def _huge_header(path):
    path.write_bytes(struct.pack("<Q", 1 << 40) + path.read_bytes()[8:])


def _garbage_header(path):
    n, _, body = _header(path)
    path.write_bytes(struct.pack("<Q", n) + b"\xff" * n + body)


def _list_header(path):
    _, _, body = _header(path)
    _write(path, [1, 2], body)


def _shape_lies(path):
    _, header, body = _header(path)
    name = next(k for k in header if k != "__metadata__")
    header[name]["shape"] = [d * 2 for d in header[name]["shape"]]
    _write(path, header, body)


@pytest.mark.parametrize("damage, says", [
    (_truncated, "truncated"), (_huge_header, "truncated: the header alone"), (_garbage_header, "corrupted header"),
    (_list_header, "corrupted header"), (_shape_lies, "offsets disagree with its shape and dtype"),
])
def test_corrupt_or_truncated_adapter_weights_are_one_line_before_any_run_folder(adapter, base, tmp_path, cli,
                                                                                    damage, says):
    bad = _copy(adapter, tmp_path)
    damage(bad / "adapter_model.safetensors")
    with pytest.raises(WhiteboxError, match=f"--adapter .*{says}"):
        configure(str(base), adapter=str(bad))
    code, _, err = cli(["mcqa", "--model", str(base), "--adapter", str(bad), "--limit", "2",
                        "--output", str(tmp_path / "runs")])
    assert code == 2 and says in err and "Traceback" not in err, err
    assert not (tmp_path / "runs").exists()


def test_the_intact_adapter_passes(adapter, base):
    assert configure(str(base), adapter=str(adapter)).adapter == str(adapter)


def test_a_revision_must_take_effect(base, tmp_path):
    with pytest.raises(WhiteboxError, match="revision=v2 has no effect on .* read from the folder"):
        configure(str(base), model_args=["revision=v2"])
    with pytest.raises(WhiteboxError, match="revision=main has no effect on smollm2-135m"):
        configure("smollm2-135m", model_args=["revision=main"])
    root = tmp_path / "root"
    shutil.copytree(base, root / "Org--tiny@v1")
    with pytest.raises(WhiteboxError, match="--model Org/tiny@v1 and --model-arg revision=v2 name two revisions"):
        configure("Org/tiny@v1", models_root=str(root), model_args=["revision=v2"])
    configure("Org/tiny@v1", models_root=str(root), model_args=["revision=v1"])  # the same one: it took effect
    assert lo.record()["model_load"]["model_args"] == {"revision": "v1"}
    with pytest.raises(WhiteboxError, match="revision=v1 has no effect on Org/tiny, which is read from the folder"):
        shutil.copytree(base, root / "Org--tiny")
        configure("Org/tiny", models_root=str(root), model_args=["revision=v1"])


def test_an_adapter_mode_without_an_adapter_is_refused(base, tmp_path, cli):
    code, _, err = cli(["mcqa", "--model", str(base), "--adapter-mode", "keep", "--output", str(tmp_path / "runs")])
    assert code == 2 and "--adapter-mode keep has no adapter to apply" in err
    assert not (tmp_path / "runs").exists()


def test_the_record_says_where_a_models_root_copy_was_found(base, tmp_path, monkeypatch):
    root = tmp_path / "root"
    shutil.copytree(base, root / "Org--tiny")
    monkeypatch.chdir(tmp_path)
    configure("Org/tiny", models_root="root")
    assert lo.record()["model_load"]["models_root"] == {"found_under": "Org--tiny", "folder": "root"}
    configure(str(base), models_root="root")  # a folder given as --model: the root was not used, nothing recorded
    assert "model_load" not in lo.record()


def test_model_args_take_lm_evals_spelling_too(base, tmp_path, cli):
    """--model_args (lm-eval's spelling, a comma list) is the option --config names model_args."""
    code, _, err = cli(["mcqa", "--model", str(base), "--model_args", "attn_implementation=eager,revision=x",
                        "--output", str(tmp_path / "runs")])
    assert code == 2 and "revision=x has no effect" in err  # read, then refused for what it would not do
    assert lo.parse_model_args(["attn_implementation=eager,low_cpu_mem_usage=true"]) == {
        "attn_implementation": "eager", "low_cpu_mem_usage": True}


def test_trust_remote_code_must_take_effect(base, tmp_path, cli):
    """The flag is refused where no custom code is named (a folder, the bundled model), accepted where
    config.json's or tokenizer_config.json's auto_map names some, and refused before any run folder."""
    with pytest.raises(WhiteboxError, match="--trust-remote-code has no effect on .*no auto_map"):
        configure(str(base), trust_remote_code=True)
    with pytest.raises(WhiteboxError, match="--trust-remote-code has no effect on smollm2-135m"):
        configure("smollm2-135m", trust_remote_code=True)
    for name in ("config.json", "tokenizer_config.json"):
        custom = tmp_path / f"custom-{name}"
        shutil.copytree(base, custom)
        data = json.loads((custom / name).read_text()) if (custom / name).is_file() else {}
        data["auto_map"] = {"AutoConfig": "configuration_x.XConfig"}
        (custom / name).write_text(json.dumps(data))
        lo.reset()
        assert configure(str(custom), trust_remote_code=True).trust_remote_code
    code, _, err = cli(["mcqa", "--model", str(base), "--trust-remote-code", "--output", str(tmp_path / "runs")])
    assert code == 2 and "--trust-remote-code has no effect" in err
    assert not (tmp_path / "runs").exists()
