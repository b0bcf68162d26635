# expect: WRONG_POLICY
# a is computed with NumPy, so it is a literal constant baked into the program: jax.checkpoint has
# no computation to redo, and the constant is saved as it is.
import jax
import numpy as np


def remat_constant(x):
    def scaled(x):
        a = (np.sin(np.arange(x.shape[0], dtype=np.float32)) ** 2).astype(np.float32)
        return a * x

    return jax.checkpoint(scaled)(x)
