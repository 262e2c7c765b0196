"""mmdkit.export"""
