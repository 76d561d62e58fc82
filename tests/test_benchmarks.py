"""The benchmark scripts at a micro size on a tiny random model: each runs to its end, so a
change of the API they call cannot break one silently. Each script is run here, run by
another test (named), or listed with the reason it cannot run on a fresh test machine.

Placeholders in the arguments: ``{tiny}`` a tiny model folder, ``{out}`` a scratch folder,
``{data}`` tiny stand-ins for the shared samples (``tests/benchmark_data.py``; also
``$WHITEBOX_SHARED_DATASETS``), ``{src}`` this checkout's ``src``, ``{tiny_chat}`` the tiny
model with a chat template, ``{tiny_smol}`` a tiny random model with SmolLM2's tokenizer (GAR's
answers need word-initial tokens; skipped where the bundled model is not installed). The lm-eval scripts run lm-eval itself (the ``lm-eval`` extra)
offline on the tiny model and those files, and their checks are lm-eval's parity with ours."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path[:0] = [str(Path(__file__).parent / "faults"), str(Path(__file__).parent)]
from cases import build_model_dir  # noqa: E402

from benchmark_data import write_datasets  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
TINY, OUT, DATA, SRC, TINY_CHAT, TINY_SMOL = "{tiny}", "{out}", "{data}", "{src}", "{tiny_chat}", "{tiny_smol}"
ARC, HELLASWAG = DATA + "/arc/arc_challenge_sample.llmfoundry.jsonl", DATA + "/hellaswag/hellaswag_val_sample.jsonl"
WHOLE = "arc_challenge/0,mmlu/5,hellaswag/10"  # the whole-files settings scored at micro size
CLI = "whitebox-eval"  # a setup step that runs the command line instead of a script

#: script -> its arguments at micro size (run last, after the script's SETUP steps)
RUNS: dict[str, list[str]] = {
    "edited_generation.py": ["--model", TINY, "--batch", "2", "--new", "4", "--neurons", "2", "--rounds", "1",
                             "--uncached-rounds", "1"],
    "ig_gradients.py": ["--model", TINY, "--samples", "1", "--steps", "1", "--joint-steps", "1"],
    "mcqa_study.py": ["--model", TINY, "--items", "12", "--min-val-items", "4", "--shots", "0",
                      "--out", OUT + "/mcqa_study.json"],
    "mui_scoring.py": ["--model", TINY, "--task", "ssd", "--limit", "4", "--repeats", "1", "--no-memory"],
    "kill_resume.py": ["--model", "tiny", "--limit", "16", "--kills", "1", "--out", OUT + "/kill"],
    "dtype_agreement.py": ["--models", TINY, "--limit", "12"],
    "sae_training.py": ["--model", TINY, "--text", DATA + "/wikitext2/valid.txt", "--layer", "1", "--context", "16",
                        "--chunks", "4", "--batch-size", "2", "--d-sae", "16", "--k", "4", "--steps", "2",
                        "--train-batch", "8", "--threads", "1", "--json", OUT + "/sae.json"],
    "sae_dead_features.py": ["--model", TINY, "--text", DATA + "/wikitext2/valid.txt", "--layer", "1", "--tokens", "2000",
                             "--context", "16", "--eval-tokens", "64", "--cache", OUT + "/residuals",
                             "--config", "16:256", "--config", "32:512:0.05:1", "--k", "4", "--steps", "3",
                             "--batch-size", "16", "--threads", "1", "--json", OUT + "/dead.json"],
    "engine_overhead.py": ["--models", TINY, "--batch-size", "2", "--n-prompts", "2", "--repeats", "1", "--shots", "0,5",
                           "--threads", "1", "--out", OUT + "/engine_overhead.json"],
    "cli_startup.py": ["--repeat", "1", "--commands", ",mcqa,runs"],
    "kshot_prefix.py": ["--model", TINY, "--items", "12", "--batch-size", "4", "--check", "8"],
    "same_numbers.py": ["compare", OUT + "/a", OUT + "/b"],
    "reproduce_timing.py": ["--paper", "003", "--scale", "micro", "--model", TINY, "--data-root", DATA,
                            "--output", OUT, "--run-id", "timed", "--out", OUT + "/reproduce_timing"],
    "reproduce_commit.py": [OUT + "/reproduce-003-micro", "--dest", OUT + "/quick", "--md", OUT + "/quick.md",
                            "--page", OUT + "/page.md", "--beside", OUT + "/reproduce-003-micro/claims.json"],
    "batch_probe_check.py": ["--tiny", "--models", "llama-3-8b", "--cap", "4", "--tokens", "32", "--repeats", "1"],
    "fault_table.py": ["--before", SRC, "--case", "mcqa --batch-size 0", "--out", OUT + "/fault_table.md"],
    "data_parallel.py": ["--model", TINY, "--items", "16", "--min-val-items", "4", "--batch-size", "4",
                         "--device", "cpu"],
    "report_size.py": ["--data", DATA, "--work", OUT + "/work", "--items", "12", "--gar-tasks", "generation",
                       "--gar-limit", "1", "--out", OUT + "/report_size.md"],
    "explorer_screenshots.py": ["--out", OUT + "/png", "mcqa=" + OUT + "/m"],
    "lm_eval_side_by_side.py": [OUT + "/parity.json", "hellaswag=" + OUT + "/hs", "arc_challenge=" + OUT + "/arc"],
    "lm_eval_fixtures.py": ["--part", "tasks", "--model-dir", TINY, "--tmp", OUT + "/tmp", "--out", OUT + "/tasks"],
    "lm_eval_whole_files.py": ["--fixture", OUT + "/lm_eval_whole.json", "--model", TINY, "--datasets", DATA,
                               "--out", OUT + "/whole_files.md"],
    "lm_eval_generation_fixture.py": ["--model-dir", TINY, "--out", OUT + "/generation", "--limit", "2"],
    "lm_eval_chat_template.py": [ARC, "--n", "2", "--model", TINY_CHAT, "--out", OUT + "/chat.json"],
    "cloze_context.py": ["--model", TINY, "--datasets", DATA, "--arms", "new,plain,lm-eval", "--only", "hellaswag/10",
                         "--items", "4", "--threads", "1", "--profile", "--out", OUT + "/cloze_context.md"],
    "arithmetic_recipes.py": ["--model", TINY, "--cats", "add2", "--limit", "80", "--shots", "1", "--lr", "1e-3",
                              "--batch", "4", "--steps", "2", "--eval-every", "1", "--val-n", "4", "--end", "newline",
                              "--out", OUT + "/recipes.json"],
    "gar_recipes.py": ["--model", TINY_SMOL, "--task", "gar:GendersOfPersons/same,CountriesOfCities/same×3;"
                       "GendersOfPersons/same,CountriesOfCities/same×3 [g2c]", "--limit", "24", "--validation", "0.25",
                       "--lr", "1e-3", "--batch", "4", "--epochs", "1", "--eval-every", "2", "--batch-size", "4",
                       "--out", OUT + "/gar_recipes.json", "--keep", OUT + "/w"],
}
#: steps run before a script (a program, "whitebox-eval" or a script, then its arguments)
SETUP: dict[str, list[list[str]]] = {
    "same_numbers.py": [["same_numbers.py", "record", "--out", OUT + f"/{x}", "--model", TINY, "--only", "mcqa_ssd"]
                        for x in "ab"],
    "reproduce_commit.py": [[CLI, "reproduce", "003", "--model", TINY, "--scale", "micro", "--data-root", DATA,
                             "--output", OUT]],
    "explorer_screenshots.py": [[CLI, "mcqa", "--model", TINY, "--task", "ssd", "--limit", "12", "--min-val-items", "4",
                                 "--output", OUT, "--run-id", "m"]],
    "lm_eval_side_by_side.py": [
        ["lm_eval_parity.py", "--model-dir", TINY, "--datasets", DATA, "--n-items", "3", "--out", OUT + "/parity.json",
         "--results-out", OUT + "/parity_results.json"],
        *([CLI, "mcqa", "--model", TINY, "--task", f"{name}={path}", "--prompt", "lm-eval", "--limit", "3",
           "--output", OUT, "--run-id", run] for name, path, run in (("hellaswag", HELLASWAG, "hs"), ("arc", ARC, "arc")))],
    "lm_eval_whole_files.py": [["lm_eval_fixtures.py", "--part", "whole", "--model-dir", TINY, "--datasets", DATA,
                                "--tmp", OUT + "/tmp", "--out", OUT + "/lm_eval_whole.json"]],
}
#: environment of a script's steps beyond the common one
# data_parallel.py: one thread in both arms (torchrun gives each rank 1), so the exact 0.0 below is by construction
ENV: dict[str, dict[str, str]] = {"lm_eval_whole_files.py": {"ONLY": WHOLE, "LIMIT": "2"},
                                  "data_parallel.py": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}}
BELOW_1E_4 = r"(0\.0e\+00|\d\.\de-(0[5-9]|[1-9]\d))"  # a difference printed as {:.1e}, under 1e-4
#: what the script's output must show (regular expressions)
EXPECT: dict[str, list[str]] = {
    "batch_probe_check.py": [r"\| llama-3-8b \(tiny\) \| 4 \| [0-9.]+ \| 1,2,4 \|"],
    "same_numbers.py": [r"mcqa_ssd: same;"],
    "gar_recipes.py": [r'"appc_generation": [01]\.\d+', r'"appc_classification": [01]\.\d+'],
    "data_parallel.py": [r"results_max_difference\s+0\.0\n", r"samples_same_order\s+True",
                         r"arrays_max_difference\s+\{'letter_logits': 0\.0, 'qk': 0\.0, 'attention': 0\.0\}"],
    "reproduce_commit.py": [r"3 child runs copied to .*, 0 missing", r"\| paper \| claim \| \S+ micro \| \S+ micro \|",
                            r"\| 003 \| [^|]+ \| (holds|contradicted|not shown at this n|uninformative|not run|not tested) \| ",
                            r"verdict table 'micro beside micro' written to \S+page\.md"],
    "fault_table.py": [r"\| mcqa --batch-size 0 \| 2 \|.*\| 2 \|", r"torn arrays/parts/main part, then --resume \| 0 \|"],
    "kshot_prefix.py": [r"5-shot / 0-shot = "],
    # lm-eval beside ours: the same prompts, no item predicted differently
    "lm_eval_side_by_side.py": [rf"{t}\s+3\s+\S+ / \S+\s+\S+ / \S+\s+0 / 0\s+\S+\s+identical"
                                for t in ("hellaswag", "arc_challenge")],
    "lm_eval_whole_files.py": [rf"\| {k} \(first 2 per task scored.*\| {n} of {n} \|.*\| none \|"
                               for k, n in (("arc_challenge/0", 2), ("mmlu/5", 6), ("hellaswag/10", 2))],
    # new vs plain: below 1e-4, or 0.0 where another CPU's kernels happen to give the same bits
    "cloze_context.py": [r"\| hellaswag/10 \| new \|.*\| 0, 0 \| \S+ \|",
                         rf"\| hellaswag/10 \| 1 \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| {BELOW_1E_4} \|",
                         r"\| all operators \| [\d.]+ \| [\d.]+ \| [+-][\d.]+ \|",
                         rf"log-likelihoods, new vs plain: largest \|difference\| {BELOW_1E_4} \(tolerance 0\.0001\)"],
}
#: what a script needs beyond a tiny model; a test without it is skipped with the reason
NEEDS: dict[str, str] = {
    "report_size.py": "bundled",  # GAR's first-token scoring needs SmolLM2's word-initial tokens
    "explorer_screenshots.py": "browser",
    **{s: "lm_eval" for s in ("lm_eval_side_by_side.py", "lm_eval_fixtures.py", "lm_eval_whole_files.py",
                              "lm_eval_generation_fixture.py", "lm_eval_chat_template.py", "cloze_context.py")},
}
#: scripts another test runs at a micro size
ELSEWHERE = {"gpu_check.py": "tests/test_gpu_check.py (--tiny)", "gpu_smoke.py": "tests/test_gpu_smoke.py (--cpu steps)",
             "op_counts.py": "tests/internals/test_op_counts.py (its counts, held to the budget)",
             "dispatch_counts.py": "the op counters op_counts.py and gpu_check.py import, run by their tests",
             "recipe_sweep.py": "the loop arithmetic_recipes.py and gar_recipes.py import, run here with them (and killed)",
             "lm_eval_parity.py": "here, in lm_eval_side_by_side.py's setup (its output is what that script reads)",
             "recompute_claims.py": "tests/reproduce/test_reproduce_micro.py (a micro reproduction recomputed from its evidence)",
             "reproduce_checkpoint.py": "tests/reproduce/test_checkpoint.py (a micro reproduction saved, restored, reused)",
             "reproduce_splice.py": "tests/reproduce/test_splice.py (a column spliced into a tmp report, then reproduce_commit.py)"}
#: scripts that need what a fresh test machine does not have
NOT_RUN = {
    # sae-lens 6.54 is no project extra: it brings about 40 packages (wandb, opentelemetry, transformer-lens 3.9, the
    # line before transformers 5), so it runs once in a venv of its own; tests/mui/test_sae_saelens_parity.py checks
    # the fixture it wrote
    "saelens_fixture.py": "SAELens, installed only in a separate venv (writes tests/fixtures/saelens)",
    # 4-bit loading is bitsandbytes on CUDA only (refused on the CPU in one line: tests/models/test_load_options.py)
    "quantized_check.py": "a CUDA GPU and bitsandbytes (a 4-bit load through --model-arg)",
    # contamination's manipulation check needs a model that can learn the items: a tiny random one never gets there
    "contamination_epochs.py": "a bundled model trained for minutes per epoch on real GSM8K items",
    # a one-off for the verdict rules' note: the YAMLs at the commit the cpu children ran with, read from git history
    "reproduce_rules_preview.py": "the git history of the checkout (the YAMLs of commit 7624415) and the committed "
                                  "cpu children",
}
#: options whose default is a file of the checkout (benchmarks/results/, tests/fixtures/)
DEFAULT_IN_CHECKOUT = {"engine_overhead.py": ["--out"], "mcqa_study.py": ["--out"], "reproduce_timing.py": ["--out"],
                       "reproduce_commit.py": ["--dest", "--md", "--page"], "lm_eval_parity.py": ["--out", "--results-out"],
                       "lm_eval_fixtures.py": ["--out"], "lm_eval_generation_fixture.py": ["--out"],
                       "lm_eval_chat_template.py": ["--out"], "lm_eval_whole_files.py": ["--out"],
                       "cloze_context.py": ["--out"]}
BROWSER = (Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver"))  # the paths the script drives


def test_every_benchmark_is_run_or_listed_with_its_reason():
    scripts = {p.name for p in BENCHMARKS.glob("*.py")}
    listed = set(RUNS) | set(ELSEWHERE) | set(NOT_RUN)
    assert scripts == listed, {"unlisted": sorted(scripts - listed), "gone": sorted(listed - scripts)}
    assert not set(RUNS) & (set(ELSEWHERE) | set(NOT_RUN))
    assert set(SETUP) | set(EXPECT) | set(NEEDS) | set(ENV) <= set(RUNS)
    for steps in SETUP.values():
        assert all(s[0] == CLI or (BENCHMARKS / s[0]).is_file() for s in steps)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(build_model_dir(tmp_path_factory.mktemp("bench") / "tiny"))


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> str:
    return str(write_datasets(tmp_path_factory.mktemp("bench_data")))


@pytest.fixture(scope="module")
def tiny_chat(tiny, tmp_path_factory) -> str:
    """The tiny model folder with a SmolLM2-like chat template (its markers are plain text here)."""
    import transformers as tf

    path = tmp_path_factory.mktemp("bench_chat") / "tiny_chat"
    shutil.copytree(tiny, path)
    tok = tf.AutoTokenizer.from_pretrained(path)
    tok.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                         "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    tok.save_pretrained(path)
    return str(path)


def _need(what: str) -> None:
    if what == "browser" and not all(p.exists() for p in BROWSER):
        pytest.skip(f"headless Chromium and chromedriver not found at {', '.join(map(str, BROWSER))}")
    if what == "lm_eval":
        pytest.importorskip("lm_eval", reason="the lm-eval extra is not installed (make installs it)")
    if what == "bundled":
        from whitebox_eval.errors import WhiteboxError
        from whitebox_eval.models import load_model

        try:
            load_model("smollm2-135m")
        except WhiteboxError as e:
            pytest.skip(f"smollm2-135m not available: {e}")


def _run(argv: list[str], env: dict, cwd: Path) -> str:
    program, *args = argv
    cmd = [sys.executable, *(["-m", "whitebox_eval"] if program == CLI else [str(BENCHMARKS / program)]), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    assert proc.returncode == 0, " ".join(argv) + "\n" + proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(RUNS))
def test_benchmark_runs_at_micro_size(script, tiny, data, tmp_path, request):
    if script in NEEDS:
        _need(NEEDS[script])
    values = {TINY: tiny, OUT: str(tmp_path), DATA: data, SRC: str(ROOT / "src")}
    if any(TINY_CHAT in a for step in [RUNS[script], *SETUP.get(script, [])] for a in step):
        values[TINY_CHAT] = request.getfixturevalue("tiny_chat")
    if any(TINY_SMOL in a for step in [RUNS[script], *SETUP.get(script, [])] for a in step):
        values[TINY_SMOL] = str(request.getfixturevalue("tiny_smol_folder"))

    def fill(args: list[str]) -> list[str]:
        for key, value in values.items():
            args = [a.replace(key, value) for a in args]
        return args

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "WHITEBOX_SHARED_DATASETS": data, "WHITEBOX_PROGRESS": "off",
           "HF_DATASETS_CACHE": str(tmp_path / "hf_datasets"), **ENV.get(script, {})}
    if NEEDS.get(script) != "bundled":  # the bundled model's dequantized folder stays where it is cached
        env["WHITEBOX_EVAL_CACHE"] = str(tmp_path / "cache")
    for step in SETUP.get(script, []):
        _run(fill(step), env, tmp_path)
    stdout = _run(fill([script, *RUNS[script]]), env, tmp_path)
    for pattern in EXPECT.get(script, []):
        assert re.search(pattern, stdout), (pattern, stdout[-3000:])


def test_every_output_goes_to_the_scratch_folder():
    """No micro run writes into the checkout: the committed results and fixtures stay as they are."""
    steps = [[script, *args] for script, args in RUNS.items()] + [s for ss in SETUP.values() for s in ss]
    for program, *args in steps:
        for flag in ("--out", "--json", "--dest", "--md", "--page", "--work", "--output", "--results-out", "--tmp"):
            if flag in args:
                assert args[args.index(flag) + 1].startswith(OUT), (program, flag)
        for flag in DEFAULT_IN_CHECKOUT.get(program, ()):
            assert flag in args, (program, flag)


@pytest.mark.slow
@pytest.mark.parametrize("program, longer, mark", [("gar_recipes.py", ("--epochs", "50"), "lr 0.001 step 2/"),
                                                   ("arithmetic_recipes.py", ("--steps", "500"), "lr 0.001 step 2:")])
def test_a_recipe_sweep_killed_writes_the_curve_so_far(tiny_smol_folder, tmp_path, program, longer, mark):
    """SIGTERM after the second evaluated step: the recipe's row is still written, with the points so far
    and ``stopped_at``."""
    import json
    import signal

    out = tmp_path / "rows.json"
    args = [str(a).replace(TINY_SMOL, str(tiny_smol_folder)).replace(TINY, str(tiny_smol_folder)).replace(OUT, str(tmp_path)) for a in RUNS[program]]
    args[args.index(longer[0]) + 1] = longer[1]  # far more steps than the test waits for
    args = args[:args.index("--out")]  # the micro run's own --out (and --keep) end its arguments
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "WHITEBOX_PROGRESS": "off"}
    proc = subprocess.Popen([sys.executable, str(BENCHMARKS / program), *args, "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    for line in proc.stdout:
        if line.startswith(mark):
            proc.send_signal(signal.SIGTERM)
            break
    proc.communicate()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["stopped_at"] >= 2 and rows[0]["steps"] > rows[0]["stopped_at"]
    assert [c["step"] for c in rows[0]["curve"]][:3] == [0, 1, 2] if program == "arithmetic_recipes.py" else \
        [c["step"] for c in rows[0]["curve"]][:2] == [0, 2]


@pytest.mark.slow
def test_the_wording_probe_reads_004s_prompt_as_the_validation_exact_match_does(tmp_path):
    """``arithmetic_recipes.py --wording``: six teacher-forced counts on the validation items; its
    004-prompt count is the library's validation exact match on the same items (SmolLM2 base, where
    some answers are right; the same batches of 16, so the same numbers), and each count is within
    the items."""
    import json

    _need("bundled")
    from whitebox_eval.finetune.check import free_exact_match
    from whitebox_eval.finetune.sources import load_items, parse_source
    from whitebox_eval.finetune.splits import make_splits
    from whitebox_eval.models import load_model

    out = tmp_path / "wording.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "WHITEBOX_PROGRESS": "off"}
    _run(["arithmetic_recipes.py", "--model", "smollm2-135m", "--cats", "add2,sub2", "--limit", "600", "--val-n", "24",
          "--wording", "base", "--out", str(out)], env, tmp_path)
    row = json.loads(out.read_text())
    counts = {k: row[k] for k in ("free_format", "question_alone", "bare_demos_then_question",
                                  "question_demos_then_bare", "bare_demos_then_bare", "bare_alone")}
    assert row["n"] == 24 and row["shots"] == 5 and all(0 <= v <= 24 for v in counts.values())
    items, _ = load_items(parse_source("arithmetic-text:add2,sub2"), 600, 0)
    splits = make_splits(items, validation=0.05, test=0.04, shots=5, seed=0)
    reference = free_exact_match(load_model("smollm2-135m"), splits.validation[:24], splits.demos, batch_size=16)
    assert counts["free_format"] == sum(reference) > 0
