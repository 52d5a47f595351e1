# frozen_string_literal: true

module Ferrolock
  class DistMutex
    # The process-wide record of DistMutex holds (Ownership), indexed by lock key (Owners.key: the
    # Redis URL, namespace and name) so that a fiber deadlock is seen through any DistMutex object
    # of that name. Holds exist here only while held: nothing is kept alive after unlock.
    #
    # Fork: a child inherits the parent's records, but the parent still holds those locks (and
    # renews them). The first call in a child forgets them all; it never releases them. A child
    # is told by Native.fork_generation (no getpid system call on every call).
    module Owners
      @lock = ::Mutex.new
      @generation = Native.fork_generation
      @by_key = {}
      NONE = [].freeze
      private_constant :NONE

      class << self
        # The key of the lock named name on url (redacted) in namespace. A Symbol: every lock and
        # unlock looks it up here, and a Symbol hashes by identity (an Array of the three strings
        # would hash them on each lookup). Dynamic Symbols are collected once unused.
        def key(url, namespace, name)
          "#{url}\n#{namespace}\n#{name}".to_sym
        end

        def add(ownership)
          @lock.synchronize do
            fresh_process!
            (@by_key[ownership.key] ||= []) << ownership
          end
          Reaper.nudge(ownership.tick, ownership.since)
        end

        # The calling fiber's Ownership of native_mutex, or nil.
        def current(native_mutex, key)
          @lock.synchronize do
            fresh_process!
            @by_key[key]&.find { |ownership| ownership.owned_by_current?(native_mutex) }
          end
        end

        # Removes and returns the calling fiber's Ownership of native_mutex (nil when none).
        def take_current(native_mutex, key)
          @lock.synchronize do
            fresh_process!
            list = @by_key[key]
            index = list&.index { |ownership| ownership.owned_by_current?(native_mutex) }
            index && remove(key, list, index)
          end
        end

        # What stands in the calling fiber's way before it waits for key, in one look (lock and
        # synchronize call it every time, so the usual case, nothing of key held here, is one
        # hash lookup): :owned when it holds key through native_mutex already, :sibling when
        # another live fiber of its thread holds key (it could never run to unlock while this one
        # waits), else the Ownerships of key whose owner ended, taken out for the caller to
        # release (usually none).
        def before_lock(native_mutex, key)
          return NONE if none_held?(key)

          @lock.synchronize do
            fresh_process!
            list = @by_key[key]
            if list.nil?
              NONE
            elsif list.any? { |ownership| ownership.owned_by_current?(native_mutex) }
              :owned
            elsif list.any?(&:sibling_fiber?)
              :sibling
            else
              take_gone_of(key)
            end
          end
        end

        # Removes and returns the Ownerships (of key, or of every key) whose owner ended.
        def take_gone(key = nil)
          @lock.synchronize do
            fresh_process!
            next take_gone_of(key) if key

            @by_key.keys.flat_map { |each_key| take_gone_of(each_key) }
          end
        end

        # The holds of thread's live fibers (a test suite's check that a test left none held).
        def held_by(thread)
          @lock.synchronize do
            fresh_process!
            @by_key.each_value.flat_map { |list| list.select { |o| o.thread.equal?(thread) && o.fiber.alive? } }
          end
        end

        # Forgets (never releases) the holds of thread's fibers that the block picks: Testing's
        # reset before an example drops the fake holds the last example left, which the fake
        # store forgot already.
        def forget_held_by(thread)
          @lock.synchronize do
            fresh_process!
            @by_key.each_value { |list| list.reject! { |each| each.thread.equal?(thread) && yield(each) } }
            @by_key.reject! { |_, list| list.empty? }
          end
          nil
        end

        # The shortest reaper tick among current holds (nil: nothing held).
        def shortest_tick
          @lock.synchronize do
            fresh_process!
            @by_key.each_value.flat_map { |list| list.map(&:tick) }.min
          end
        end

        private

        # True when this process holds nothing of key (the usual case before a lock), looked up
        # without @lock: a Hash read is one call, which no other Ruby thread interrupts (the
        # GVL). False in a forked child until its first call under @lock forgot the parent's.
        def none_held?(key)
          @generation == Native.fork_generation && !@by_key.key?(key)
        end

        # Each ended hold's release is announced before it leaves the record (under @lock), so
        # that from here to Redis's answer this process's locked? and try_lock wait for it.
        def take_gone_of(key)
          list = @by_key[key]
          return NONE unless list

          ended, running = list.partition(&:owner_gone?)
          return NONE if ended.empty?

          running.empty? ? @by_key.delete(key) : list.replace(running)
          ended.each { |ownership| ownership.native_mutex.announce_release(ownership.hold) }
        end

        def remove(key, list, index)
          ownership = list.delete_at(index)
          @by_key.delete(key) if list.empty?
          ownership
        end

        # In a forked child: the parent's holds are not ours to release, so forget them.
        def fresh_process!
          generation = Native.fork_generation
          return if @generation == generation

          @generation = generation
          @by_key = {}
        end
      end
    end
  end
end
