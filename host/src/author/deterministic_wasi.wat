;; A WASI preview 1 that decides nothing: the adapter `policy componentize` puts inside a
;; component whose core module imports `wasi_snapshot_preview1` (Go's runtime does), so
;; that the component imports only the contract's `log` and a decision stays a pure
;; function of its input.
;;
;; Go's wasip1 runtime calls WASI while it starts (args, environment, preopens, stdio,
;; clocks, 32 random bytes) and while it runs (clocks for the scheduler and the GC,
;; fd_write for panics and prints). Every answer here is the same in every instance:
;; - clocks: the wall clock stands at the Unix epoch (a policy reads `Input.Now`); the
;;   monotonic clock starts at 2^60 ns, later than any clock the build's snapshot read
;;   (Go measures from it, and aborts on "nanotime returning zero"), and moves 1 µs a read;
;; - random_get: a xorshift64* stream from a fixed seed;
;; - no arguments, no environment, no preopened directory; stdin reads nothing;
;; - fd_write to stdout logs at `info`, to stderr at `warn` (one line a buffer);
;; - poll_oneoff (a sleeping policy) is refused: Go reports it and exits;
;; - proc_exit traps.
;; An adapter may hold no data and no stack (wit-component's rules): state is in globals.
(module
  (import "env" "memory" (memory 0))
  (import "podset:policy/log@0.4.0" "log" (func $log (param i32 i32 i32)))

  (global $monotonic (mut i64) (i64.const 0x1000000000000000))
  (global $random (mut i64) (i64.const 0x2545f4914f6cdd1d))

  (func (export "args_sizes_get") (param $count i32) (param $size i32) (result i32)
    (i32.store (local.get $count) (i32.const 0))
    (i32.store (local.get $size) (i32.const 0))
    (i32.const 0))
  (func (export "args_get") (param i32 i32) (result i32) (i32.const 0))
  (func (export "environ_sizes_get") (param $count i32) (param $size i32) (result i32)
    (i32.store (local.get $count) (i32.const 0))
    (i32.store (local.get $size) (i32.const 0))
    (i32.const 0))
  (func (export "environ_get") (param i32 i32) (result i32) (i32.const 0))

  ;; clock_time_get(id, precision, *time) -> errno
  (func (export "clock_time_get") (param $id i32) (param i64) (param $time i32) (result i32)
    (if (i32.eqz (local.get $id))
      (then (i64.store (local.get $time) (i64.const 0)))
      (else
        (global.set $monotonic (i64.add (global.get $monotonic) (i64.const 1000)))
        (i64.store (local.get $time) (global.get $monotonic))))
    (i32.const 0))
  (func (export "clock_res_get") (param i32) (param $res i32) (result i32)
    (i64.store (local.get $res) (i64.const 1000))
    (i32.const 0))

  ;; random_get(*buf, len) -> errno
  (func (export "random_get") (param $buf i32) (param $len i32) (result i32)
    (local $x i64)
    (block $done
      (loop $byte
        (br_if $done (i32.eqz (local.get $len)))
        (local.set $x (global.get $random))
        (local.set $x (i64.xor (local.get $x) (i64.shr_u (local.get $x) (i64.const 12))))
        (local.set $x (i64.xor (local.get $x) (i64.shl (local.get $x) (i64.const 25))))
        (local.set $x (i64.xor (local.get $x) (i64.shr_u (local.get $x) (i64.const 27))))
        (global.set $random (local.get $x))
        (i64.store8 (local.get $buf)
          (i64.shr_u (i64.mul (local.get $x) (i64.const 0x2545f4914f6cdd1d)) (i64.const 56)))
        (local.set $buf (i32.add (local.get $buf) (i32.const 1)))
        (local.set $len (i32.sub (local.get $len) (i32.const 1)))
        (br $byte)))
    (i32.const 0))

  ;; fd_write(fd, *iovs, iovs_len, *written) -> errno: each buffer is a log line.
  (func (export "fd_write") (param $fd i32) (param $iovs i32) (param $count i32) (param $written i32) (result i32)
    (local $level i32) (local $total i32) (local $len i32)
    (if (i32.and (i32.ne (local.get $fd) (i32.const 1)) (i32.ne (local.get $fd) (i32.const 2)))
      (then (return (i32.const 8)))) ;; EBADF
    (local.set $level (select (i32.const 2) (i32.const 3) (i32.eq (local.get $fd) (i32.const 1))))
    (block $done
      (loop $iov
        (br_if $done (i32.eqz (local.get $count)))
        (local.set $len (i32.load offset=4 (local.get $iovs)))
        (if (local.get $len)
          (then (call $log (local.get $level) (i32.load (local.get $iovs)) (local.get $len))))
        (local.set $total (i32.add (local.get $total) (local.get $len)))
        (local.set $iovs (i32.add (local.get $iovs) (i32.const 8)))
        (local.set $count (i32.sub (local.get $count) (i32.const 1)))
        (br $iov)))
    (i32.store (local.get $written) (local.get $total))
    (i32.const 0))

  ;; fd_read(fd, *iovs, iovs_len, *read) -> errno: stdin is empty.
  (func (export "fd_read") (param $fd i32) (param i32 i32) (param $read i32) (result i32)
    (if (local.get $fd) (then (return (i32.const 8))))
    (i32.store (local.get $read) (i32.const 0))
    (i32.const 0))

  ;; fd_fdstat_get(fd, *fdstat) -> errno: stdin, stdout and stderr are character devices.
  (func (export "fd_fdstat_get") (param $fd i32) (param $stat i32) (result i32)
    (if (i32.gt_u (local.get $fd) (i32.const 2)) (then (return (i32.const 8))))
    (i64.store (local.get $stat) (i64.const 2))
    (i64.store offset=8 (local.get $stat) (i64.const 0))
    (i64.store offset=16 (local.get $stat) (i64.const 0))
    (i32.const 0))
  (func (export "fd_fdstat_set_flags") (param i32 i32) (result i32) (i32.const 0))
  (func (export "fd_close") (param i32) (result i32) (i32.const 0))
  ;; No preopened directories: the first fd_prestat_get ends the enumeration.
  (func (export "fd_prestat_get") (param i32 i32) (result i32) (i32.const 8))
  (func (export "fd_prestat_dir_name") (param i32 i32 i32) (result i32) (i32.const 8))

  (func (export "poll_oneoff") (param i32 i32 i32 i32) (result i32) (i32.const 52)) ;; ENOSYS
  (func (export "sched_yield") (result i32) (i32.const 0))
  (func (export "proc_exit") (param i32) (unreachable))
)
