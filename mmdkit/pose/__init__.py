"""mmdkit.pose"""
