# frozen_string_literal: true

# Run as a child (`ruby -Ilib spec/support/namespaced_app_holder.rb`): loads
# spec/fixtures/namespaced_app.rb, takes its DistMutex and one slot of its ConcurrentLimiter,
# prints "ready", and holds them until stdin closes.
require_relative "../fixtures/namespaced_app"

mutex = Ferrolock::DistMutex.new(NamespacedApp::MUTEX, lease: 120)
mutex.lock(timeout: 10)
held = Queue.new
done = Queue.new
slot = Thread.new do
  NamespacedApp.limiter.within_limit(wait_timeout: 10) do
    held << true
    done.pop
  end
end
held.pop
$stdout.puts("ready")
$stdout.flush
$stdin.read # until the spec closes stdin
done << true
slot.join
mutex.unlock
