"""mmdkit.animation"""
