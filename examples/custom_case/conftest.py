# A user's repository registers its own cases at conftest import time.
import axpy  # noqa: F401
