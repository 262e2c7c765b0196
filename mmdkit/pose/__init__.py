"""Posing: ``Character`` (frame-by-frame, preallocated) and ``pose`` (batch) — see character.py."""

from mmdkit.pose.character import STAGES, Character, pose

__all__ = ["Character", "pose", "STAGES"]
