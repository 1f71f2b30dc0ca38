"""The private APIs of the libraries gpt1 builds on, each behind one function here and nowhere else, so that an upgrade
that removes or changes one breaks one place, loudly: ``tests/test_compat.py`` checks that each still exists.

Each function imports its library when it is called, not when this module is imported (the model and the CPU path
import this module and only torch)."""

# -- torch ------------------------------------------------------------------------------------------------------------

# -- Hydra ------------------------------------------------------------------------------------------------------------

# -- OmegaConf --------------------------------------------------------------------------------------------------------

# -- Lightning --------------------------------------------------------------------------------------------------------

# -- submitit ---------------------------------------------------------------------------------------------------------
