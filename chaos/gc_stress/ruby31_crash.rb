# frozen_string_literal: true

# Ruby 3.1.2 (Debian 12's) crashes by itself under what chaos/gc_stress.rb does, with no extension
# loaded: threads that come and go (Timeout 0.2 starts one per Timeout.timeout call) while objects
# are moved (GC.auto_compact and a GC.compact thread), and
# GC.verify_compaction_references(double_heap: true, toward: :empty) between rounds. After a
# verify or a few, a later GC (a GC.compact or GC.start) dies with "[BUG] Segmentation fault" at
# an address in a heap page already unmapped (the C backtrace goes through vm.c's execution
# context marking), or "[BUG] system stack overflow during GC". Without that verify, or with a
# plain GC.verify_compaction_references, it ran through (60 s, several tries). So
# chaos/gc_stress.rb verifies with no arguments on Ruby 3.1 (GcPass.verify_options).
#   ruby chaos/gc_stress/ruby31_crash.rb [SECONDS]   (exit 0: it ran through; 3.3 and 3.4 do)
require "timeout"

$stdout.sync = true

def now
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

GC.auto_compact = true
lock = Mutex.new
deadline = now + Float(ARGV.fetch(0, 60))
round = 0
while now < deadline
  stop = now + 6
  workers = Array.new(16) do
    Thread.new do
      while now < stop
        begin
          Timeout.timeout(rand(0.001..0.05)) { lock.synchronize { sleep(rand * 0.03) } }
        rescue Timeout::Error
          nil
        end
        junk = Array.new(rand(1..40)) { |i| "#{i}-#{rand(1 << 30)}" * 3 }
        lock.synchronize { junk.each_slice(3).to_h { |a| [a[0], a] } }
      end
    end
  end
  compactor = Thread.new do
    while now < stop
      GC.compact
      sleep(rand * 0.05)
    end
  end
  [*workers, compactor].each(&:join)
  # 3.1's keyword is double_heap:, 3.2's and later expand_heap:.
  names = GC.method(:verify_compaction_references).parameters.map(&:last)
  GC.verify_compaction_references((names.include?(:expand_heap) ? :expand_heap : :double_heap) => true, toward: :empty)
  puts "round #{round += 1}"
end
puts "ran through: #{RUBY_DESCRIPTION}"
