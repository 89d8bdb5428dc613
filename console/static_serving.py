"""Static files through WhiteNoise: the collected tree (compressed copies beside each file) when scripts/run
or the Dockerfile ran collectstatic, else the source files from the finders (settings.WHITENOISE_USE_FINDERS)."""

import os

from whitenoise.middleware import WhiteNoiseMiddleware


class StaticFiles(WhiteNoiseMiddleware):
    def add_files(self, root, prefix=None):
        # No collected tree is normal in development and tests: the finders serve then, without a warning.
        if root and not os.path.isdir(root):
            return
        super().add_files(root, prefix)
