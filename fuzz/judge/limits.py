"""The default time limit of one example under thunderfx. No torch here: the pytest plugin and the command line
declare their options from it before anything heavy is imported."""

DEFAULT_TIMEOUT_S = 120.0
