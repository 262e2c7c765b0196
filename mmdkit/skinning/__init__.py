"""mmdkit.skinning: bind mesh + bone matrices → skinned vertices, and what hangs off skinning.

``cpu.CpuSkinner`` (vertices grouped once into runs sharing their bones; the BDEF1/2/4, SDEF, QDEF kernels are in
``kernels``, their stack scratch and row stores in ``scratch``), ``palette.build_palette_batches`` (bone-palette
batches), ``bounds.BoneBoxes`` (per-bone hit boxes), ``cage.TriangleCage`` (cage-driven meshes),
``reference`` (slow float64 formulas for tests). Import the submodule you need.
"""
