"""lm-eval's spellings on the study commands: ``--log_samples`` accepted, ``--gen_kwargs``
mapped onto the generation options a command has (its own option wins), refused in one line
where it has no meaning. Every check stops before any model work."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from whitebox_eval.cli import cli
from whitebox_eval.command_options import parse_gen_kwargs


class Captured(Exception):
    """Raised by the stand-in run function with the config the command built."""


@pytest.fixture
def capture_run(monkeypatch):
    """Replace a study's run function so the command's config is caught, no model loaded."""
    def install(module: str, name: str):
        import importlib

        def fake(cfg, *a, **k):
            raise Captured(cfg)
        monkeypatch.setattr(importlib.import_module(module), name, fake)

    def invoke(args):
        out = CliRunner().invoke(cli, args)
        if isinstance(out.exception, Captured):
            return out.exception.args[0]
        raise AssertionError(f"exit {out.exit_code}: {out.output[-800:]}")
    return install, invoke


def test_parse_gen_kwargs_follows_lm_eval():
    assert parse_gen_kwargs("temperature=0,top_p=0.9,do_sample=False,until=###,max_gen_toks=64") == {
        "temperature": 0, "top_p": 0.9, "do_sample": False, "until": "###", "max_gen_toks": 64}
    assert parse_gen_kwargs('{"until": ["\\n\\n", "Q:"], "max_gen_toks": 8}') == {"until": ["\n\n", "Q:"],
                                                                                   "max_gen_toks": 8}


def test_formats_maps_gen_kwargs_and_its_own_options_win(capture_run):
    install, invoke = capture_run
    install("whitebox_eval.formats.study", "run_formats")
    cfg = invoke(["formats", "--gen_kwargs", "temperature=0.5,top_p=0.9,top_k=40,max_gen_toks=7,do_sample=true",
                  "--log_samples"])
    assert (cfg.temperature, cfg.top_p, cfg.top_k, cfg.max_new_tokens) == (0.5, 0.9, 40, 7)
    cfg = invoke(["formats", "--gen_kwargs", "temperature=0.5,max_gen_toks=7", "--max-new-tokens", "9"])
    assert (cfg.temperature, cfg.max_new_tokens) == (0.5, 9)
    assert "top_p" not in cfg.to_dict()  # recorded only when given


def test_mui_maps_until_and_the_budget(capture_run):
    install, invoke = capture_run
    install("whitebox_eval.mui.study", "run_mui")
    cfg = invoke(["mui", "--task", "arithmetic-gen", "--gen_kwargs", "until=###,max_gen_toks=12,do_sample=false",
                  "--log_samples"])
    assert cfg.max_new_tokens == 12 and tuple(cfg.stop) == ("###",)


@pytest.mark.parametrize("command, kwargs, says", [
    (["mui", "--task", "arithmetic-gen"], "do_sample=true", "MUI reads greedy responses"),
    (["mui", "--task", "arithmetic-gen"], "temperature=0.7", "MUI reads greedy responses"),
    (["mui", "--task", "arithmetic-gen"], "top_p=0.9", "it takes do_sample, max_gen_toks, temperature, until"),
    (["formats"], "do_sample=false", "formats samples its free answers"),
    (["formats"], "until=x", "has no meaning for `whitebox-eval formats`"),
    (["mcqa"], "temperature=0", "mcqa scores the options"),
    (["gar"], "max_gen_toks=4", "gar reads P(answer)"),
    (["span"], "temperature=0", "span decodes greedily"),
    (["formats"], "temperature", "is not KEY=VALUE"),
])
def test_gen_kwargs_without_meaning_are_one_line(command, kwargs, says):
    out = CliRunner().invoke(cli, [*command, "--gen_kwargs", kwargs])
    assert out.exit_code == 2 and says in out.output, out.output[-600:]
    assert "Traceback" not in out.output


@pytest.mark.parametrize("command", ["mcqa", "formats", "mui", "gar", "span"])
def test_every_study_command_accepts_log_samples(command):
    out = CliRunner().invoke(cli, [command, "--log_samples", "--help"])
    assert out.exit_code == 0 and "--log_samples" in out.output and "--gen_kwargs" in out.output


def test_formats_top_p_and_top_k_reach_the_sampler():
    """A nucleus this small keeps the top token alone: every draw is the greedy answer (and so
    is top_k=1); without them the 8 draws at T=1 of a random model differ."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from tiny_models import tiny_formats_llama
    from whitebox_eval.formats.generation import sample_prompt

    lm = tiny_formats_llama()
    common = dict(n_samples=8, max_new_tokens=5, seed=3, stop=None)
    greedy = sample_prompt(lm, "1 + 2 =", temperature=0.0, **common)
    assert len(set(greedy)) == 1
    assert sample_prompt(lm, "1 + 2 =", temperature=1.0, top_p=1e-6, **common) == greedy
    assert sample_prompt(lm, "1 + 2 =", temperature=1.0, top_k=1, **common) == greedy
    assert len(set(sample_prompt(lm, "1 + 2 =", temperature=1.0, **common))) > 1
