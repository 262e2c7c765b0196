"""`mmdkit info` and `mmdkit convert` as users run them."""

from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner

from mmdkit.cli import cli


def run(*args):
    return subprocess.run([sys.executable, "-m", "mmdkit", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def test_info_json_gene(assets):
    out = run("info", assets / "gene" / "Gene.pmx", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["format"] == "pmx" and d["version"] == "2.0" and d["encoding"] == "utf-16-le"
    assert (d["vertices"], d["bones"], d["morphs"], d["rigid_bodies"], d["joints"]) == (28646, 224, 184, 87, 92)
    assert d["soft_bodies"] == 0 and d["faces"] == 47106 and d["warnings"] == []
    assert d["names"]["bones"][0] == "全ての親"


def test_info_human_and_vmd_vpd(assets, tmp_path):
    r = CliRunner().invoke(cli, ["info", str(assets / "wavefile" / "wavefile_v2.vmd")])
    assert r.exit_code == 0 and "bone keys" in r.output and "14,160" in r.output
    r = CliRunner().invoke(cli, ["info", "--json", str(assets / "wavefile" / "wavefile_v2.vmd")])
    d = json.loads(r.output)
    for k in ("bone_keys", "morph_keys", "camera_keys", "light_keys", "shadow_keys", "property_keys"):
        assert k in d
    assert d["bone_keys"] == 14160
    vpd = tmp_path / "p.vpd"
    vpd.write_bytes("Vocaloid Pose Data file\r\n\r\nm.osm;\r\n1;\r\n\r\nBone0{頭\r\n 0,0,0;\r\n 0,0,0,1;\r\n}\r\n"
                    .encode("cp932"))
    d = json.loads(CliRunner().invoke(cli, ["info", "--json", str(vpd)]).output)
    assert d["format"] == "vpd" and d["bones"] == 1 and d["names"]["bones"] == ["頭"]


def test_info_warns_on_quirks(assets):
    r = CliRunner().invoke(cli, ["info", str(assets / "fixtures/yohawing-three-mmd-loader/test/fixtures/"
                                               "joint_orient_test.vmd")])
    assert r.exit_code == 0 and "warning:" in r.output and "0002" in r.output


def test_bad_file_is_one_line_error(tmp_path, assets):
    bad = tmp_path / "bad.pmx"
    bad.write_bytes((assets / "gene" / "Gene.pmx").read_bytes()[:4000])
    out = run("info", bad)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "bad.pmx" in out.stderr and "section 'vertices'" in out.stderr and "byte" in out.stderr


def test_convert_pmd_to_pmx_and_rewrite(assets, tmp_path):
    dst = tmp_path / "gene.pmx"
    out = run("convert", assets / "gene" / "Gene.pmd", dst)
    assert out.returncode == 0, out.stderr
    d = json.loads(run("info", dst, "--json").stdout)
    assert d["format"] == "pmx" and d["bones"] == 224 and d["rigid_bodies"] == 87 and d["joints"] == 92
    same = tmp_path / "same.vmd"
    r = CliRunner().invoke(cli, ["convert", str(assets / "gene/motion/01_happy.vmd"), str(same)])
    assert r.exit_code == 0 and same.read_bytes() == (assets / "gene/motion/01_happy.vmd").read_bytes()


def test_info_reports_missing_textures(assets, tmp_path):
    import shutil

    lonely = tmp_path / "Gene_light.pmx"  # the model without its texture folder
    shutil.copy(assets / "gene" / "Gene_light.pmx", lonely)
    d = json.loads(run("info", lonely, "--json").stdout)
    assert d["textures"] > 0 and sorted(d["missing_textures"]) == sorted(d["names"]["textures"])
    human = run("info", lonely).stdout
    assert f"warning: texture '{d['names']['textures'][0]}' not found in {tmp_path}" in human
    d = json.loads(run("info", assets / "gene" / "Gene_light.pmx", "--json").stdout)
    assert d["missing_textures"] == []


def test_convert_to_pmd_says_what_it_dropped_and_carries_textures(assets, tmp_path):
    out = tmp_path / "sub"
    out.mkdir()
    r = run("convert", assets / "gene" / "Gene_light.pmx", out / "gene.pmd")
    assert r.returncode == 0, r.stderr
    assert "dropped 7 morphs PMD cannot hold (only vertex morphs): 3 material, 1 UV, 3 group" in r.stderr
    assert "4916 BDEF4/QDEF vertices written as BDEF2" in r.stderr
    assert "copied 10 texture files" in r.stdout
    d = json.loads(run("info", out / "gene.pmd", "--json").stdout)
    assert d["missing_textures"] == [] and d["textures"] == 10  # the relative paths resolve where it was written
    r = run("convert", assets / "gene" / "Gene.pmd", tmp_path / "gene.pmx")  # PMD → PMX drops nothing
    assert r.returncode == 0 and "dropped" not in r.stderr and "written as BDEF2" not in r.stderr
