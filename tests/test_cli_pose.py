"""`mmdkit pose` as users run it: compressed output, physics default, binding report, quiet runs."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from mmdkit.cli import main


def run_cli(capsys, *args):
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@pytest.fixture
def gene_dance(assets):
    return assets / "gene" / "Gene.pmx", assets / "wavefile" / "wavefile_v2.vmd"


def test_pose_output_is_compressed_unless_asked(capsys, gene_dance, tmp_path):
    sizes = {}
    for name, extra in (("packed", []), ("plain", ["--no-compress"])):
        out = tmp_path / f"{name}.npz"
        code, _, err = run_cli(capsys, "pose", *gene_dance, "--frames", "0:4", "--no-physics", "--vertices",
                               "-o", out, *extra)
        assert code == 0, err
        with zipfile.ZipFile(out) as z:
            kinds = {i.compress_type for i in z.infolist()}
        assert kinds == ({zipfile.ZIP_DEFLATED} if name == "packed" else {zipfile.ZIP_STORED})
        sizes[name] = out.stat().st_size
    a, b = np.load(tmp_path / "packed.npz"), np.load(tmp_path / "plain.npz")
    for k in ("frames", "bone_world", "morph_weight", "vertex_position"):
        np.testing.assert_array_equal(a[k], b[k])
    assert sizes["packed"] < 0.9 * sizes["plain"]
