"""Binding a motion to a model says how many bone/morph tracks bound and which did not."""

from __future__ import annotations

import mmdkit
from mmdkit.animation.binding import BindingReport, bind_motion
from mmdkit.animation.builder import MotionBuilder
from mmdkit.model.builder import ModelBuilder

LONG = "左足ＩＫ親先端長い名前"  # 22 cp932 bytes: a VMD keeps 15, binding matches the prefix


def small_model():
    mb = ModelBuilder("m")
    root = mb.add_bone("センター", (0, 8, 0), translatable=True)
    mb.add_bone("左足", (1, 8, 0), root)
    mb.add_bone(LONG, (1, 0, 0), root)
    m = mb.add_material("m")
    v = mb.add_mesh(m, [[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0, 0, -1]] * 3, [[0, 0]] * 3, [[0, 1, 2]], [0, 1, 2])
    mb.add_vertex_morph("あ", [v], [[0, 1, 0]])
    return mb.build()


def test_report_counts_bound_and_names_unbound(tmp_path):
    mo = MotionBuilder()
    for name in ("センター", "左足", "右足", "右ひじ", LONG):
        mo.add_bone_key(name, 0)
    mo.add_morph_key("あ", 0, 1.0)
    mo.add_morph_key("まばたき", 0, 1.0)
    p = tmp_path / "other.vmd"
    mmdkit.save(mo.build(), p)
    motion = mmdkit.load(p)
    assert motion.bone_track_name_bytes[-1] == LONG.encode("cp932")[:15]
    report = bind_motion(small_model(), motion).report()
    assert (report.bound_bones, report.bone_tracks, report.bound_morphs, report.morph_tracks) == (3, 5, 1, 2)
    assert report.unbound_bones == ("右足", "右ひじ") and report.unbound_morphs == ("まばたき",)
    assert not report.complete
    assert str(report) == ("bound 3/5 bone tracks, 1/2 morph tracks; unbound bones: 右足, 右ひじ; "
                           "unbound morphs: まばたき")


def test_report_of_a_fitting_and_an_empty_motion():
    mo = MotionBuilder()
    mo.add_bone_key("センター", 0)
    report = bind_motion(small_model(), mo.build()).report()
    assert report.complete and str(report) == "bound 1/1 bone tracks, 0/0 morph tracks"
    assert bind_motion(small_model(), None).report() == BindingReport(0, 0)


def test_report_lists_at_most_eight_names():
    mo = MotionBuilder()
    for i in range(11):
        mo.add_bone_key(f"bone{i}", 0)
    text = str(bind_motion(small_model(), mo.build()).report())
    assert text.startswith("bound 0/11 bone tracks") and "bone7" in text and "bone8" not in text
    assert text.endswith("(+3 more)")


def test_a_morph_track_binds_by_the_english_name_when_no_name_fits():
    """A track names a morph by its English name only when no morph has that name (a VRM Animation's
    expression 'aa' drives the morph imported as あ with English name aa); an exact name wins."""
    mb = ModelBuilder("m")
    root = mb.add_bone("センター", (0, 8, 0), translatable=True)
    mb.add_bone("左足", (1, 8, 0), root)
    mb.add_bone("右足", (-1, 8, 0), root)
    m = mb.add_material("m")
    v = mb.add_mesh(m, [[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0, 0, -1]] * 3, [[0, 0]] * 3, [[0, 1, 2]], [0, 1, 2])
    mb.add_vertex_morph("あ", [v], [[0, 1, 0]], name_en="aa")
    mb.add_vertex_morph("aa", [v], [[0, 2, 0]], name_en="")
    mb.add_vertex_morph("い", [v], [[0, 3, 0]], name_en="ih")
    model = mb.build()
    mo = MotionBuilder("x")
    for name in ("aa", "ih", "oh"):
        mo.add_morph_key(name, 0, 1.0)
    bound = bind_motion(model, mo.build())
    assert bound.unbound_morphs == ("oh",)
    starts = bound.morph_key_start
    assert [int(starts[i + 1] - starts[i]) for i in range(3)] == [0, 1, 1]  # 'aa' → the morph named aa
