"""What a trained model is worth and looks like: its losses and metrics measured, a card's numbers checked
and recorded, its spread over seeds, its pictures.

May import entries/, store/ and the parts; never training/, cli/ or extras/.
"""
