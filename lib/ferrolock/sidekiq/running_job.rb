# frozen_string_literal: true

module Ferrolock
  module Sidekiq
    # The job this fiber is running (set by Unique::ServerMiddleware around every job), so the client
    # middlewares can tell a resumption from a new job: a push of the same ActiveJob job (same job_id,
    # new jid) made while it runs is that job enqueuing itself again to go on — a Rails 8.1 continuation
    # interrupted at a checkpoint, ActiveJob's retry_on, an explicit retry_job. (retry_on pushes after
    # ActiveJob's perform callbacks ended, so an around_perform callback could not see it.)
    module RunningJob
      KEY = :ferrolock_running_job

      module_function

      # Runs the block with `payload` as this fiber's running job.
      def running(payload, &block)
        FiberLocal.with(KEY, payload, &block)
      end

      # The running job's jid when `payload` enqueues it again (same ActiveJob job_id), else nil.
      def resumed_jid(payload)
        running = Thread.current[KEY]
        return nil unless running

        job_id = ActiveJobHooks.active_job_id(payload)
        job_id && job_id == ActiveJobHooks.active_job_id(running) ? running["jid"] : nil
      end
    end
  end
end
