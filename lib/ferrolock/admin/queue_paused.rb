# frozen_string_literal: true

module Ferrolock
  class Admin
    # A Shoryuken queue whose lock an operator paused (Admin#paused_queues): `name` is the queue.
    QueuePaused = Struct.new(:kind, :name, keyword_init: true)
  end
end
