# The notebook goes looking for other people's work and every copy of the solutions it might reach, and prints
# whatever it can read into its own outputs (which land in the autograded notebook and the feedback): a
# classmate's submission in an exchange outside the course ($EXCHANGE), a copy of the project's tracks/ outside
# the course ($COPY), the course's own submissions and solutions, other homes and scratch folders. The sandbox
# shows none of them (an allowlist), so nothing secret comes back. Its kernels are the reference's.
# expect: map_correct=2 map_limits=1

# %% map+
import glob

for pattern in ("$EXCHANGE/*/inbound/*/*.ipynb", "$EXCHANGE/*/*/*/*", "$COPY/tracks/*/solutions/*",
                "$COURSE/submitted/*/*/*.ipynb", "$COURSE/source/*/*.ipynb", "$ROOT/tracks/*/solutions/*",
                "/var/tmp/*/*/*", "/root/*", "/home/*/*", "/srv/*", "/opt/*/*", "/mnt/*"):
    for path in glob.glob(pattern):
        try:
            with open(path, errors="replace") as f:
                print("read", path, f.read(4000))
        except OSError as exc:
            print("refused", path, exc)
