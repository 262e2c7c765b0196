"""mmdkit.physics"""
