"""mmdkit.model — the immutable character data every other layer reads.

``model.Model`` (structure of arrays, the field list is the contract), ``build.build_model``
(field dict → validated, frozen Model; ``check_index``/``check_starts`` for every index table),
``builder.ModelBuilder`` (make one in code) and ``deform`` (per-deform weight rules).
Imports only the base layer (errors, text).
"""
