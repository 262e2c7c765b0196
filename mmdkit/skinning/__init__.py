"""mmdkit.skinning: bind mesh + bone matrices → skinned vertices, and what hangs off skinning.

``cpu.CpuSkinner`` (vertices grouped by deform type once; the BDEF1/2/4, SDEF, QDEF kernels are in
``kernels``), ``palette.build_palette_batches`` (bone-palette
batches), ``bounds.BoneBoxes`` (per-bone hit boxes), ``cage.TriangleCage`` (cage-driven meshes),
``reference`` (slow float64 formulas for tests). Import the submodule you need.
"""
