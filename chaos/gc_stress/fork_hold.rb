# frozen_string_literal: true

module Chaos
  module GcStress
    # tgkill(2) through Fiddle: kill(2) lets the kernel pick the thread (the main one, as a rule),
    # but the race needs the signal on one of ferrolock's threads. Without Fiddle: nothing sent.
    module Tgkill
      SYS_TGKILL = 234 # x86_64
      USR2 = Signal.list.fetch("USR2")

      def self.usr2(pid, tid)
        syscall&.call(SYS_TGKILL, pid, tid, USR2)
      end

      def self.syscall
        return @syscall if defined?(@syscall)

        @syscall = begin
          require "fiddle"
          long = Fiddle::TYPE_LONG
          Fiddle::Function.new(Fiddle.dlopen(nil)["syscall"], [long] * 4, long)
        rescue LoadError, Fiddle::DLError
          nil
        end
      end
    end

    # A fork while a DistMutex section is held (Sidekiq Enterprise, Puma and Resque fork from
    # threaded processes). The child leaves the held block by an exception, as a child that
    # returns would, so the block's release runs in the child: it must not release the parent's
    # lock. Then it compacts and talks to Redis through the inherited client and a new one. The
    # parent waits for it inside the section, then finishes the block: a LockLost there, or a
    # second holder meanwhile, means the child took the lock away.
    class ForkHold
      # Unwinds the child out of the held block. Not a StandardError: nothing on the way rescues it.
      class ChildSide < Exception; end # rubocop:disable Lint/InheritException -- see above

      # Seconds a child may take before it counts as hung.
      CHILD_WAIT = 20
      # Lock/ping rounds a child makes (a few ms each).
      CHILD_CALLS = 30
      # Seconds between forks: each child is a whole process on a 2-core machine.
      GAP = 0.5

      def initialize(env, mutex, load)
        @env = env
        @mutex = mutex
        @load = load
        @last = 0.0
      end

      def run
        # The turn is taken inside the begin, so a Thread#raise cannot leave the gate shut.
        return :skipped unless Thread.handle_interrupt(Object => :never) { take_turn }

        @mutex.synchronize(wait_timeout: WAIT) { @load.section { fork_child } }
        :ok
      rescue ChildSide
        child_tail
      ensure
        @env.fork_gate.unlock if @env.fork_gate.owned?
      end

      private

      # One fork in flight at a time, GAP apart.
      def take_turn
        return false unless @env.fork_gate.try_lock

        now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        if now - @last < GAP
          @env.fork_gate.unlock
          return false
        end
        @last = now
        true
      end

      def fork_child
        pid = Process.fork
        raise ChildSide if pid.nil?

        # The wait is not cut short by the storm: the child is always reaped and judged.
        Thread.handle_interrupt(Object => :never) { wait_child(pid) }
      end

      # While it waits, it sends SIGUSR2 (trapped, harmless) every millisecond or so to each of
      # the child's threads: the child makes its blocking calls as its only Ruby thread, the case
      # where Ruby 3.3's signal handler calls the unblocking function without its lock, on
      # whichever thread got the signal; its other threads are ferrolock's own (issue 32, item 1).
      def wait_child(pid)
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + CHILD_WAIT
        loop do
          _, status = Process.waitpid2(pid, Process::WNOHANG)
          return judge(pid, status) if status
          return hung(pid) if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

          signal(pid)
          Kernel.sleep 0.001
        end
      end

      def signal(pid)
        Process.kill("USR2", pid)
        (Dir.children("/proc/#{pid}/task").map(&:to_i) - [pid]).each { |tid| Tgkill.usr2(pid, tid) }
      rescue Errno::ESRCH, Errno::ENOENT
        nil
      end

      def judge(pid, status)
        return if status.success?

        how = status.signaled? ? "died of signal #{status.termsig}" : "exited #{status.exitstatus}"
        @env.tally.problem("fork child #{pid} #{how} (its output is in the log)")
      end

      # SIGSEGV makes Ruby print the hung child's [BUG] report (C and Ruby backtraces) to the log.
      def hung(pid)
        @env.tally.problem("fork child #{pid} hung for #{CHILD_WAIT} s; SIGSEGV sent for its backtrace")
        Process.kill("SEGV", pid)
        Kernel.sleep 3
        Process.kill("KILL", pid)
        Process.wait(pid)
      rescue Errno::ESRCH, Errno::ECHILD
        nil
      end

      # In the child (its only thread), after the held block was left: never returns.
      def child_tail
        status = child_checks ? 0 : 5
      rescue Exception => e # rubocop:disable Lint/RescueException -- the child must exit! whatever happened
        where = (e.backtrace || []).first(8).join("\n  ")
        warn "gc_stress: fork child #{Process.pid}: #{e.class}: #{e.message}\n  #{where}"
        status = 6
      ensure
        $stdout.flush
        $stderr.flush
        exit!(status)
      end

      def child_checks
        GC.compact
        # The parent holds it still: the child's leaving the block released nothing.
        held = @mutex.locked?
        warn "gc_stress: fork child #{Process.pid}: the parent's lock is free" unless held
        client = Ferrolock::Client.new(url: @env.url, namespace: NAMESPACE)
        own = Ferrolock::DistMutex.new("gc:fork-child", lease: LEASE, client: client)
        # Blocking calls while the lock's watchdog thread runs, under the parent's signals.
        CHILD_CALLS.times { own.synchronize(wait_timeout: WAIT) { client.ping && @env.client.ping } }
        GC.compact
        stale = Ferrolock::Native.respond_to?(:stale_unblock_calls) ? Ferrolock::Native.stale_unblock_calls : 0
        warn "gc_stress: fork child #{Process.pid}: #{stale} stale unblocking call(s)" if stale.positive?
        held
      end
    end
  end
end
