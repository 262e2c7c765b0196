"""mmdkit.animation — keyframe data and how it is sampled.

``motion.Motion``/``Pose`` (frozen key arrays), ``build.build_motion`` (validation),
``builder.MotionBuilder``, ``curves`` (VMD interpolation bytes), ``binding.bind_motion`` (tracks →
model bones/morphs/IK, with a report), ``sampling``/``camera`` (values at a frame), ``vpd`` (poses
as motions), ``frames`` (output frame ranges, fps, the ``--frames`` grammar), ``rotation``
(vectorised quaternion slerp and matrices). Imports only the model and base layers.
"""
