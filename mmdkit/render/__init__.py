"""mmdkit.render"""
