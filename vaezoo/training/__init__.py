"""Training from a card's recipe: one run, an ensemble of runs, or one per process under torchrun.

May import entries/, store/, evaluation/ and the parts; never cli/ or extras/.
"""
