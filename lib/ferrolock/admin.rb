# frozen_string_literal: true

require_relative "admin/key_space"
require_relative "admin/scanner"
require_relative "admin/reading"
require_relative "admin/holder"
require_relative "admin/lease_info"
require_relative "admin/mutex_info"
require_relative "admin/dual_lock_info"
require_relative "admin/limiter_info"
require_relative "admin/concurrency_info"
require_relative "admin/marker_info"
require_relative "admin/tenant_info"
require_relative "admin/unique_info"
require_relative "admin/rule_count"
require_relative "admin/rate_definition"
require_relative "admin/rate_info"
require_relative "admin/release"
require_relative "admin/table"
require_relative "admin/stats"
require_relative "admin/kind_stats"
require_relative "admin/limit_override"
require_relative "admin/queue_paused"
require_relative "admin/live_limits"

module Ferrolock
  # What ferrolock holds in Redis, for operators (the Sidekiq Web "Locks" tab and the
  # `ferrolock` command), and the force release.
  #
  #   admin = Ferrolock::Admin.new
  #   page = admin.locks("report:*")        # DistMutex and DualLock locks, one SCAN page
  #   page.items.each { |lock| puts lock.name }
  #   admin.locks("report:*", cursor: page.cursor) unless page.last?
  #   admin.force_release("report:42")      # => [#<struct Released kind=:dist_mutex, ...>]
  #   admin.uniques("ReportJob")             # Sidekiq uniqueness digests of a job class
  #   admin.rate_limiters("partner-*")       # RateLimiters' state
  #
  # Listing uses SCAN with MATCH on the namespace and a bounded COUNT, never KEYS. It reads the
  # one server (single node or the Sentinel primary), or every master of a Redis Cluster in turn.
  class Admin
    include LiveLimits

    # The `ferrolock` command's parts' names (exe/ferrolock requires ferrolock/admin/cli) before each
    # name gave its file (0.x): kept, warning once.
    Deprecation.renamed_constants(self, %w[App Arguments NamespaceHint Options Output Password StatsCommand]
                                          .to_h { |part| [:"Cli#{part}", "Ferrolock::Admin::Cli::#{part}"] })
    # LeaseInfo's names before a limiter's slot and a DualLock's stage were one struct.
    Deprecation.renamed_constants(self, SlotInfo: "Ferrolock::Admin::LeaseInfo", Stage: "Ferrolock::Admin::LeaseInfo")

    attr_reader :client

    def initialize(client: nil)
      @client = Validate.client!(client)
      @keys = KeySpace.new(@client.namespace)
      @scanner = Scanner.new(@client)
    end

    # name's history (Ferrolock::History) over the last since seconds (or "1h"; at most 72 hours): Stats.
    def stats(name, since: 3600)
      Stats.read(@client, name, since)
    end

    # One primitive's (kind's: :dist_mutex, :concurrent_limiter …) busiest names and its events per
    # bucket over the last since seconds: KindStats.
    def kind_stats(kind, since: 3600)
      KindStats.read(@client, kind, since)
    end

    # DistMutex (MutexInfo) and DualLock (DualLockInfo) locks whose name matches the glob. A
    # uniqueness digest's push-time lock (a jid, not a DistMutex) is listed by #uniques instead.
    def locks(pattern = "*", cursor: "0", per_page: 25)
      mutex = Reading.parts(:dist_mutex)
      page(pattern, cursor, per_page, mutex + Reading.parts(:dual_lock)) do |name, part|
        if mutex.include?(part)
          MutexInfo.read(@client, name) unless UniqueInfo.digest?(name)
        else
          DualLockInfo.read(@client, name)
        end
      end
    end

    # Sidekiq uniqueness digests (UniqueInfo): the push-time lock and the run-time lock on
    # `<digest>:run`. `pattern`: a glob on the job class ("Report*"), or on the whole digest when
    # it starts with "unique:" ("unique:ReportJob:3fa*").
    def uniques(pattern = "*", cursor: "0", per_page: 25)
      pattern = KeySpace.pattern!(pattern)
      prefix = Reading.prefix(:unique_lock)
      pattern = "#{prefix}#{pattern}:*" unless pattern.start_with?(prefix)
      found = @scanner.scan(@keys.match(pattern, "*"), cursor: Scanner.cursor!(cursor),
                                                       per_page: Scanner.per_page!(per_page)) do |key|
        unique_digest(key)
      end
      lock_types = {}
      items = found.items.map { |key| unique_digest(key) }.uniq.filter_map do |digest|
        UniqueInfo.read(@client, digest, lock_types)
      end
      Scanner::Page.new(items: items, cursor: found.cursor)
    end

    # RateLimiters (RateInfo) with state in Redis (a limiter idle for its interval has none).
    def rate_limiters(pattern = "*", cursor: "0", per_page: 25)
      definitions = RateInfo.definitions(@client.namespace)
      prefix = Reading.prefix(:rate_limiter)
      page("#{prefix}#{KeySpace.pattern!(pattern)}", cursor, per_page, Reading.parts(:rate_limiter)) do |name, part|
        name = name.delete_prefix(prefix)
        RateInfo.read(@client, name, part, definitions[[name, RateInfo.kind_of(part)]])
      end
    end

    # ConcurrentLimiters (LimiterInfo) with a live slot, a waiter or an override.
    def limiters(pattern = "*", cursor: "0", per_page: 25)
      page(pattern, cursor, per_page, Reading.parts(:concurrent_limiter)) do |name, _|
        LimiterInfo.read(@client, name) if LimitOverride.limiter_name?(name)
      end
    end

    # ActiveJob limits_concurrency keys (ConcurrencyInfo): `pattern` matches "<group>/<key>".
    def concurrency(pattern = "*", cursor: "0", per_page: 25)
      pattern = "#{Reading.prefix(:limits_concurrency)}#{KeySpace.pattern!(pattern)}"
      page(pattern, cursor, per_page, Reading.parts(:limits_concurrency)) do |name, _|
        ConcurrencyInfo.read(@client, name)
      end
    end

    # Frees the slot `job_id` holds on a limits_concurrency key ("<group>/<key>"), or takes it out
    # of the key's line, and enqueues the next blocked job into a slot so freed. True when it held
    # a live slot.
    def force_release_job(key, job_id)
      key = Validate.name!(:key, key)
      job_id = Validate.text!(:job_id, job_id)
      # (Redis' own, as the unblock: never a testing mode's fake)
      slots = Ferrolock::ActiveJob::Slots.new(@client, Native::JobConcurrency.new(@client.native))
      # (Taken out of the line first: the release promotes only the jobs still in it.)
      Native::Admin.unblock_job(@client.native, key, job_id)
      slots.give_back(key, job_id).tap do
        Ferrolock.instrument(:released, primitive: :limits_concurrency, name: key, job_id: job_id, forced: true)
      end
    end

    # Shoryuken message markers (MarkerInfo); `pattern` matches the queue name.
    def markers(queue_pattern = "*", cursor: "0", per_page: 25)
      pattern = "#{Reading.prefix(:shoryuken_marker)}#{KeySpace.pattern!(queue_pattern)}:*"
      page(pattern, cursor, per_page, Reading.parts(:shoryuken_marker)) { |name, _| MarkerInfo.read(@client, name) }
    end

    # A job class's tenants (TenantInfo), or every class's (job_class nil). `rules:` (the
    # fair_tenant_queues Array) and `queue:` default to the class's sidekiq_options when it is loaded.
    def tenants(job_class = nil, cursor: "0", per_page: 25, rules: nil, queue: nil)
      queue = Validate.text!(:queue, Symbol === queue ? queue.to_s : queue) unless nil.equal?(queue) # rubocop:disable Style/CaseEquality -- BasicObject-safe
      prefix = if nil.equal?(job_class)
                 KeySpace.escape(Reading.prefix(:fair_tenant))
               else
                 KeySpace.escape(TenantInfo.class_name(job_class!(job_class)))
               end
      configs = Hash.new { |h, klass| h[klass] = tenant_config(klass, rules, queue) }
      page("#{prefix}*", cursor, per_page, Reading.parts(:fair_tenant), escaped: true) do |name, part|
        klass = TenantInfo.split(name)&.first or next
        TenantInfo.read(@client, name, part, configs[klass])
      end
    end

    # Everything held under one exact name: MutexInfo, DualLockInfo, LimiterInfo; for a uniqueness
    # digest ("unique:<class>:<hex>"), its UniqueInfo (empty: none).
    def show(name)
      name = Validate.name!(:name, name)
      return [UniqueInfo.read(@client, name)].compact if UniqueInfo.digest?(name)

      [MutexInfo, DualLockInfo, LimiterInfo].filter_map { |reader| reader.read(@client, name) }
    end

    # Releases what holds `name` (see Release): `kind:` one of :dist_mutex, :dual_lock,
    # :concurrent_limiter, :unique_lock (default: all that apply: a uniqueness digest's push-time
    # lock, else the first three); `token:` only that holder (a job's jid for :unique_lock).
    # Returns the Released holds.
    def force_release(name, kind: nil, token: nil)
      name = Validate.name!(:name, name)
      token = Validate.text!(:token, token) unless nil.equal?(token) # (a BasicObject has no nil?)
      Release.new(@client).call(name, kind: kind, token: token)
    end

    private

    # One SCAN page of items: keys of the given parts, each (name, part) read by the block into
    # an item or nil. An item found under two keys of one page (a DualLock's exec and wait) is
    # listed once.
    def page(pattern, cursor, per_page, parts, escaped: false, &block)
      pattern = KeySpace.pattern!(pattern) unless escaped
      match = @keys.match(pattern, parts.size == 1 ? parts.first : "*")
      found = @scanner.scan(match, cursor: Scanner.cursor!(cursor), per_page: Scanner.per_page!(per_page)) do |key|
        parts.include?(@keys.parse(key)&.last)
      end
      items = found.items.map { |key| @keys.parse(key) }.uniq.filter_map(&block)
      Scanner::Page.new(items: items.uniq { |item| [item.kind, item.name] }, cursor: found.cursor)
    end

    # The uniqueness digest a key belongs to (its push-time or run-time lock), or nil.
    def unique_digest(key)
      name, part = @keys.parse(key)
      Reading.parts(:unique_lock).include?(part) ? UniqueInfo.digest_of(name) : nil
    end

    def job_class!(value)
      Validate.text!(:job_class, Symbol === value ? value.to_s : value) # rubocop:disable Style/CaseEquality -- BasicObject-safe
    end

    def tenant_config(job_class, rules, queue)
      options = sidekiq_options(job_class)
      [FairTenant::Rules.parse(rules || options["fair_tenant_queues"]), queue || options["queue"]]
    rescue ArgumentError, TypeError
      [nil, queue]
    end

    def sidekiq_options(job_class)
      klass = Object.const_get(job_class)
      klass.respond_to?(:get_sidekiq_options) ? klass.get_sidekiq_options : {}
    rescue NameError
      {}
    end
  end
end
