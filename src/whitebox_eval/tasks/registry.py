"""One record per dataset: what it is, where its items come from, how it is asked and checked.

As lm-eval keeps one YAML per task, every fact about a dataset lives in its
:class:`TaskRecord` here: its name and files, whether it is generated or read, whether its
items are multiple-choice or free generation (or both), its splits and demonstration rule,
lm-eval's name for it and the ``--prompt lm-eval`` style, and how a suite that generates
(``mui``, ``formats``) asks it and checks an answer (:class:`Generation`,
:mod:`whitebox_eval.tasks.answer_checks`). Suites read these facts through
:class:`~whitebox_eval.tasks.spec.TaskSpec` (``spec.record``); none keeps a table keyed by
dataset name.

Adding a local dataset is one module and one record: write ``tasks/NAME.py`` with
``load_NAME(path, *, on_bad_row, limit, seed) -> MCQDataset`` (:mod:`.rows` gives the
readers and the bad-row policy; add ``lm_eval_doc(item)`` if lm-eval has the task, and
``hub_row(row)`` if its hub rows need reshaping), then add ``TaskRecord(name="NAME",
source=FILE, mcq=True, loader="whitebox_eval.tasks.NAME:load_NAME", ...)`` to
:data:`RECORDS` (naming ``lm_eval_doc`` / ``hub_row`` the same way). Every function a record
names is found by :func:`resolve` (``module:function``). ``--task NAME=PATH`` then works in every suite that takes
multiple-choice tasks, ``mui`` asks it with letter answers, ``formats`` in free text.
"""

from __future__ import annotations

from dataclasses import dataclass

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.lazy import resolve

GENERATOR, FILE, LM_EVAL = "generator", "file", "lm-eval"
DEV_SAME_SUBJECT, SPLIT, POOL = "dev_same_subject", "split", "pool"

#: stop strings every free answer ends at: a blank line, or the next question (001 App. A.6)
BASE_STOPS: tuple[str, ...] = ("\n\n", "\nQuestion:")
PAPER_MAX_NEW_TOKENS = 1024
"""001 App. A.6: "a maximum token length of 1024"."""

LETTER_INSTRUCTION = "Answer with the letter of the correct option."
LETTER_GOLD = "The correct answer is {label}. {option}"
#: 001 App. C's one-shot demonstrations (plain text), and ours in the same style where it has none
MMLU_DEMO = ("Question: Where is the sinoatrial node located?\n"
             "A. Between the left atrium and the left ventricle\n"
             "B. Between the right atrium and the right ventricle\n"
             "C. In the upper wall of the right atrium\n"
             "D. In the upper wall of the left ventricle",
             "The correct answer is C. The sinoatrial (SA) node is the heart's natural pacemaker, "
             "located in the upper wall of the right atrium.")
ARC_DEMO = ("Question: A comet passes close to a planet, causing a slight wobble in its orbit. Which is the most "
            "likely effect of this wobble?\n"
            "A. The planet will move faster in its orbit.\n"
            "B. The planet's orbit will become more elliptical.\n"
            "C. The planet's axial tilt will change.\n"
            "D. The planet's temperature will increase.",
            "The correct answer is C. The planet's axial tilt will change.")
GSM8K_DEMO = ("Question: Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. "
              "How much did she earn?",
              "Weng babysat for 50 minutes, which is 50/60 = 5/6 of an hour. At $12 per hour, her earnings are "
              "12 * 5/6 = 10 dollars. The answer is 10.")
HUMANEVAL_STOPS = ("\nclass", "\ndef", "\n#", "\nif", "\nprint")
"""lm-eval's humaneval ``until``: a completion ends where a new top-level block starts."""
SSD_DEMO = ('Question: Which of the following options corresponds to " river "?\n'
            "A. candle\nB. river\nC. window\nD. silver", "The correct answer is B.")


@dataclass(frozen=True)
class Generation:
    """How a dataset is asked and checked in free generation (paper 001 App. A.6, App. C).

    ``check``: the answer check (:func:`whitebox_eval.tasks.answer_checks.check`); ``instruction``:
    the one line appended to zero-shot questions (001 prints none: ours); ``demonstration``:
    the one-shot (question, answer) for base models (App. C; None: the task's first item is
    held out as its demonstration); ``gold``: the reference response of ``--responses gold``
    (``{label}``, ``{option}`` for letter answers; ``{answer}`` otherwise); ``stops``: where a
    response ends; ``max_new_tokens``: the budget (App. A.6).
    """

    check: str
    instruction: str = ""
    demonstration: tuple[str, str] | None = None
    gold: str = " {answer}"
    stops: tuple[str, ...] = BASE_STOPS
    max_new_tokens: int = PAPER_MAX_NEW_TOKENS


def letters(demonstration: tuple[str, str] = MMLU_DEMO, gold: str = LETTER_GOLD) -> Generation:
    """A multiple-choice dataset asked with its options lettered, answered by a letter."""
    return Generation(check="choice", instruction=LETTER_INSTRUCTION, demonstration=demonstration,
                      gold=" " + gold, stops=("\n", *BASE_STOPS))


@dataclass(frozen=True)
class TaskRecord:
    """Everything known about one dataset (module docstring).

    ``source``: ``generator`` (``NAME[:CATEGORY,...]``), ``file`` (``NAME=PATH``, a file, a
    folder or ``hf:...``) or ``lm-eval`` (``lm-eval:TASK``). ``mcq``: it has multiple-choice
    items (``loader`` gives them; generators ``loader(spec, n, seed=, n_options=, language=)``,
    files ``loader(path, on_bad_row=, limit=, seed=)``). ``generation``: how it is asked in
    free generation (multiple-choice datasets: with letter answers, unless the dataset has a
    native free answer); ``generation_loader`` gives its generation items where they are not
    the lettered MCQ items. ``categories``: where a generator's categories are listed
    (``module:NAME``). ``lm_eval_tasks``: lm-eval's tasks for it, each with the hub dataset
    that task reads (the hint for a task given as lm-eval names it); ``hub``: the hub dataset
    the dataset's own loader reads by default (the hint's online form); ``lm_eval_output``: the ``--prompt lm-eval`` style
    (``letters`` or ``cloze``), or None with ``no_lm_eval`` saying why; ``lm_eval_draws_extra``:
    lm-eval's sampler draws k + 1 and drops the evaluated document (its few-shot split equals
    its test split in the config). ``hub_train``: its hub dataset has a train split
    (demonstrations). ``demos``: where k-shot demonstrations come from
    (:mod:`.demos`). ``answer_types``: ``text`` when the gold choice is text a free answer can
    match (paper 004's free formats), ``number`` for arithmetic. ``hub_row``: reshapes a hub row
    into its file layout (None: the rows have it); ``lm_eval_doc``: the item as lm-eval's task
    sees it (``--prompt lm-eval``); both ``module:function``. ``runs_code``: its answers are scored
    by running them (HumanEval), allowed only with ``--allow-code-execution``.
    """

    name: str
    summary: str
    source: str
    mcq: bool = False
    generation: Generation | None = None
    loader: str | None = None
    generation_loader: str | None = None
    files: str = ""
    categories: str | None = None
    lm_eval_tasks: tuple[tuple[str, str], ...] = ()
    hub: str = ""
    lm_eval_output: str | None = None
    lm_eval_draws_extra: bool = False
    no_lm_eval: str = "lm-eval has no task for it"
    hub_train: bool = False
    demos: str = POOL
    answer_type: str = "text"
    hub_row: str | None = None
    lm_eval_doc: str | None = None
    runs_code: bool = False  # scored by executing the model's output: only with --allow-code-execution

    @property
    def is_generator(self) -> bool:
        return self.source == GENERATOR

    @property
    def is_file(self) -> bool:
        return self.source == FILE

    def form(self) -> str:
        """How ``--task`` writes it."""
        if self.source == LM_EVAL:
            return "lm-eval:TASK"
        if self.source == FILE:
            return f"{self.name}=PATH"
        return f"{self.name}[:CATEGORY,...]" if self.categories else self.name


_T = "whitebox_eval.tasks."
_CATEGORIES = _T + "arithmetic:ARITHMETIC_CATEGORIES"
RECORDS: dict[str, TaskRecord] = {r.name: r for r in (
    TaskRecord("ssd", "paper 000's Simple Synthetic Dataset (sec. 5.1)", GENERATOR, mcq=True,
               loader=_T + "ssd:ssd_items", generation=letters(SSD_DEMO, "The correct answer is {label}."),
               no_lm_eval="synthetic (paper 000)"),
    TaskRecord("planted-facts", "MCQs about made-up entities: the facts finetune --task planted-facts trains "
               "(trained) or never-trained ones (control)", GENERATOR, mcq=True,
               loader=_T + "planted_facts:planted_items", categories=_T + "planted_facts:COHORTS",
               no_lm_eval="synthetic (ours, paper 000 with planted knowledge)"),
    TaskRecord("arithmetic", "paper 004's arithmetic MCQs (App. B)", GENERATOR, mcq=True,
               loader=_T + "arithmetic:arithmetic_items", categories=_CATEGORIES, answer_type="number",
               no_lm_eval="synthetic (paper 004)"),
    TaskRecord("arithmetic-gen", "paper 004's arithmetic questions answered in free text (paper 001)", GENERATOR,
               generation=Generation("number", "Answer with the number only.",
                                     ("Question: What is the value of 36 + 47?", "83"), stops=("\n", *BASE_STOPS)),
               loader=_T + "arithmetic:arithmetic_items", generation_loader=_T + "generation:arithmetic_gen_items",
               categories=_CATEGORIES,
               no_lm_eval="synthetic (paper 004)"),
    TaskRecord("mmlu", "MMLU (Hendrycks et al.)", FILE, mcq=True, loader=_T + "mmlu:load_mmlu", hub_row=_T + "mmlu:hub_row", lm_eval_doc=_T + "mmlu:lm_eval_doc",
               files="hendrycks CSV without header question,A,B,C,D,answer-letter (one file per subject, or a folder "
                     "of them), or a headered CSV question,choice0..3,answer (answer 0-3 or a letter)",
               generation=letters(MMLU_DEMO), lm_eval_tasks=(("mmlu", "hf:cais/mmlu:all@test"),), lm_eval_output="letters",
               hub="hf:cais/mmlu:all@test",
               demos=DEV_SAME_SUBJECT),
    TaskRecord("hellaswag", "HellaSwag (Zellers et al.)", FILE, mcq=True, loader=_T + "hellaswag:load_hellaswag",
               lm_eval_doc=_T + "hellaswag:lm_eval_doc",
               files="original jsonl: ctx (or ctx_a + ctx_b), endings, label",
               generation=letters(), lm_eval_tasks=(("hellaswag", "hf:Rowan/hellaswag@validation"),),
               hub="hf:Rowan/hellaswag@validation",
               lm_eval_output="cloze", lm_eval_draws_extra=True, hub_train=True, demos=SPLIT),
    TaskRecord("cosmosqa", "CosmosQA (Huang et al.)", FILE, mcq=True, loader=_T + "cosmosqa:load_cosmosqa",
               files="csv or jsonl: id, context, question, answer0..answer3, label", generation=letters(),
               no_lm_eval="lm-eval 0.4.13 has no CosmosQA task", hub="hf:allenai/cosmos_qa@validation",
               hub_train=True, demos=SPLIT),
    TaskRecord("halueval", "HaluEval dialogue (Li et al.)", FILE, mcq=True, loader=_T + "halueval:load_halueval",
               files="dialogue JSON lines: knowledge, dialogue_history, right_response, hallucinated_response",
               generation=letters(),
               no_lm_eval="lm-eval's halueval tasks ask for a Yes/No judgment, not paper 000's four dialogue options",
               demos=SPLIT),
    TaskRecord("arc", "ARC (Clark et al.)", FILE, mcq=True, loader=_T + "arc:load_arc", hub_row=_T + "arc:hub_row", lm_eval_doc=_T + "arc:lm_eval_doc",
               files="llm-foundry jsonl (query, choices, gold) or AI2 jsonl (question.stem, question.choices[].text/"
                     "label, answerKey)",
               generation=letters(ARC_DEMO), lm_eval_tasks=(("arc_challenge", "hf:allenai/ai2_arc:ARC-Challenge@test"),
                                                           ("arc_easy", "hf:allenai/ai2_arc:ARC-Easy@test")),
               hub="hf:allenai/ai2_arc:ARC-Challenge@test",
               lm_eval_output="cloze", hub_train=True, demos=SPLIT),
    TaskRecord("triviaqa", "TriviaQA (Joshi et al.; paper 004 sec. 2.3)", FILE, mcq=True,
               loader=_T + "triviaqa:load_triviaqa", hub_row=_T + "triviaqa:hub_row",
               files="llm-foundry jsonl (context, answer, aliases) or rc-style jsonl (question, answer.value, "
                     "answer.aliases); optional distractors under distractors / incorrect_answers",
               generation=Generation("exact", "Answer with a few words.", ("Question: Which planet is known as the "
                                                                            "Red Planet?", "Mars"),
                                     stops=("\n", *BASE_STOPS)),
               generation_loader=_T + "generation:triviaqa_items",
               lm_eval_tasks=(("triviaqa", "hf:mandarjoshi/trivia_qa:rc.nocontext@validation"),),
               hub="hf:mandarjoshi/trivia_qa:rc.nocontext@validation",
               no_lm_eval="lm-eval's triviaqa is free generation (use the formats command)", demos=SPLIT),
    TaskRecord("gsm8k", "GSM8K (Cobbe et al.)", FILE,
               files="GSM8K jsonl: question, answer ending in '#### N'",
               generation=Generation("final_number", "Solve the problem step by step and end with 'The answer is N.'",
                                     GSM8K_DEMO, gold=" {answer}"),
               generation_loader=_T + "generation:gsm8k_items", lm_eval_tasks=(("gsm8k", "hf:openai/gsm8k:main@test"),),
               hub="hf:openai/gsm8k:main@test",
               no_lm_eval="lm-eval's gsm8k is a generation task (--task lm-eval:gsm8k)"),
    TaskRecord("humaneval", "HumanEval (Chen et al.): pass@1 by running each problem's tests (paper 001)", FILE,
               files="OpenAI's JSON lines (task_id, prompt, canonical_solution, test, entry_point), .jsonl or .jsonl.gz",
               generation=Generation("execution", stops=HUMANEVAL_STOPS), generation_loader=_T + "humaneval:gen_items",
               lm_eval_tasks=(("humaneval", "hf:openai/openai_humaneval@test"),), hub="hf:openai/openai_humaneval@test",
               no_lm_eval="lm-eval's humaneval is a generation task (--task lm-eval:humaneval, online)", runs_code=True),
    TaskRecord("bigbench", "BIG-Bench tasks asked as BIG-Bench Hard asks them, 3-shot (paper 001)", FILE,
               files="BIG-Bench task.json (examples: input with target_scores or target), or a folder of them",
               generation=Generation("exact", stops=("\n", *BASE_STOPS)), generation_loader=_T + "bigbench:gen_items",
               no_lm_eval="lm-eval's bbh tasks read BBH's re-laid-out rows (--task lm-eval:bbh_fewshot_...)"),
    TaskRecord("mcq", "your own multiple-choice file", FILE, mcq=True, loader=_T + "mcq:load_mcq_file", hub_row=_T + "mcq:hub_row",
               lm_eval_doc=_T + "mcq:lm_eval_doc",
               files="JSON lines, CSV or Parquet with a question, 2-26 choices (a list or one column per choice) and "
                     "the answer (index, letter, text)",
               generation=letters(), lm_eval_output="letters"),
    TaskRecord("gen", "your own generation file", FILE,
               files="JSON lines, CSV or Parquet with a prompt or question, one or more reference answers, optional "
                     "context and id; checked by --answer exact|numeric|regex:PATTERN|contains",
               generation=Generation("exact"), generation_loader=_T + "gen_file:gen_items"),
    TaskRecord("lm-eval", "any task of lm-evaluation-harness, through its own task objects", LM_EVAL, mcq=True,
               generation=Generation("lm-eval"), generation_loader=_T + "lm_eval_generation:gen_items"),
)}


def record(name: str) -> TaskRecord:
    """The record of dataset ``name``; a one-line error listing the known names."""
    try:
        rec = RECORDS[name]
    except KeyError:
        raise WhiteboxError(f"unknown task {name!r}; known: {', '.join(RECORDS)}") from None
    return rec


def categories(rec: TaskRecord) -> tuple[str, ...]:
    """The categories a generator offers (arithmetic's App. B categories), else ()."""
    return tuple(resolve(rec.categories)) if rec.categories else ()


def names(*, mcq: bool | None = None, generation: bool | None = None, source: str | None = None) -> tuple[str, ...]:
    """Record names filtered by what they offer (e.g. ``names(mcq=True)``: every multiple-choice task)."""
    return tuple(r.name for r in RECORDS.values()
                 if (mcq is None or r.mcq == mcq) and (generation is None or (r.generation is not None) == generation)
                 and (source is None or r.source == source))


def usage(accepted: tuple[str, ...]) -> str:
    """The task forms a suite accepts, for its help and error lines."""
    return " | ".join(record(n).form() for n in accepted)
