"""One worker of t-stress.sh: random operations on 40 shared names for a
given number of seconds.  ENOENT is expected (another worker got there
first); any other error fails the worker.

    stress_worker.py DIR SEED SECONDS
"""
import os, random, sys, time, errno
d = sys.argv[1]; seed = int(sys.argv[2]); dur = float(sys.argv[3])
rng = random.Random(seed)
names = ["f%d" % i for i in range(40)]
end = time.time() + dur
ops = 0
while time.time() < end:
    n = os.path.join(d, rng.choice(names)); r = rng.random()
    try:
        if r < 0.3:
            fd = os.open(n, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, os.urandom(rng.choice([100, 65536, 200000]))); os.close(fd)
        elif r < 0.45:
            fd = os.open(n, os.O_RDWR); os.pwrite(fd, b"x" * 5000, rng.randrange(0, 100000)); 
            if rng.random() < 0.3: os.fsync(fd)
            os.close(fd)
        elif r < 0.7:
            with open(n, "rb") as f: f.read()
        elif r < 0.8:
            os.truncate(n, rng.randrange(0, 300000))
        elif r < 0.9:
            os.rename(n, os.path.join(d, rng.choice(names)))
        else:
            os.unlink(n)
        ops += 1
    except FileNotFoundError:
        pass
    except OSError as e:
        if e.errno not in (errno.ENOENT,):
            print("error", e); raise
print("worker", seed, "ops", ops)
