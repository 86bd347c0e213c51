"""Runs a command under `/usr/bin/time -v`: its standard output and its peak resident memory."""
import re, subprocess, sys


def timed(cmd):
    """(stdout, peak resident MB) of `cmd`; exits with its stderr if it fails."""
    out = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{out.stderr}")
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", out.stderr).group(1)) / 1024
    return out.stdout, rss
