"""The built-in edit kinds, one file each: what the kind is (its request in
:mod:`whitebox_eval.internals.requests`), its ``--edit`` grammar, its plan in a pass and its op-count
cases, declared once as a :class:`whitebox_eval.internals.edit_kind.EditKind` named ``KIND``
(collected by :mod:`whitebox_eval.internals.edit_registry`)."""
