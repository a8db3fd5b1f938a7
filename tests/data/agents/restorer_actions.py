"""CybORG's ChallengeWrapper numbers the restorer uses: Sleep is action 0, Restore host h is 132 + h; User0 is host
8 of the observation's 13."""
SLEEP = 0
RESTORE = 132
USER0 = 8
