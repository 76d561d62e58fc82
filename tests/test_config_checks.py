"""What a config can refuse without a model is refused when the config is made: mcqa's methods,
prompt style, lm-eval view and edits the cloze cannot run under; an edit at ``@last`` in mui. No
model is named that exists, so a check that needed one would fail otherwise."""

from __future__ import annotations

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mcqa.config import MCQAConfig
from whitebox_eval.mui.config import MUIConfig

NO_MODEL = "no/such-model"


@pytest.mark.parametrize("settings, says", [
    ({"methods": ("baseline", "nope")}, "unknown method 'nope'"),
    ({"prompt": "lm-eval"}, "task ssd has prompt styles: paper"),
    ({"methods": ("baseline", "cloze"), "edits": ("ablate:1.0@last",)}, "one packed row"),
    ({"methods": ("cloze",), "edits": ("attn:1.0:all>first:force",)}, "one packed row"),
    ({"task": "lm-eval:sciq", "view": "cloze", "methods": ("qk",)}, "lists no options"),
    ({"task": "lm-eval:sciq", "view": "sideways"}, "--view 'sideways'"),
    ({"task": "lm-eval:sciq", "apply_chat_template": True}, "--apply-chat-template is not supported"),
])
def test_mcqa_refuses_at_the_config(settings, says):
    with pytest.raises(WhiteboxError, match=says):
        MCQAConfig(model=NO_MODEL, **settings)


def test_mcqa_takes_an_edit_the_cloze_can_run_and_letters_any():
    assert MCQAConfig(model=NO_MODEL, methods=("cloze",), edits=("ablate:1.0",)).edits == ("ablate:1.0",)
    assert MCQAConfig(model=NO_MODEL, methods=("baseline",), edits=("ablate:1.0@last",)).edits == ("ablate:1.0@last",)


def test_mui_refuses_an_edit_at_last_at_the_config():
    with pytest.raises(WhiteboxError, match="leave out @last"):
        MUIConfig(model=NO_MODEL, edits=("ablate:0.0@last",))
    assert MUIConfig(model=NO_MODEL, edits=("ablate:0.0",)).edits == ("ablate:0.0",)
