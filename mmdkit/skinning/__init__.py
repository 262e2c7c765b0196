"""mmdkit.skinning: bind mesh + bone matrices → skinned vertices, and what hangs off skinning.

``cpu.CpuSkinner`` (vertices grouped once into runs sharing their bones; the BDEF1/2/4, SDEF, QDEF kernels are in
``kernels``, their stack scratch and row stores in ``scratch``), ``palette.build_palette_batches`` (bone-palette
batches), ``bounds.BoneBoxes`` (per-bone hit boxes), ``cage.TriangleCage`` (cage-driven meshes). Import the
submodule you need (the slow float64 formulas the tests check the kernels with are tests/skinning_reference.py).
"""
