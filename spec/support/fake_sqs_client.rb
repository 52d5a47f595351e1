# frozen_string_literal: true

module FerrolockTest
  # Stands in for Aws::SQS::Client (aws-sdk-sqs is not installable here) under the REAL Shoryuken:
  # answers the calls Shoryuken makes and records each one as [name, params], so a spec can
  # check what Shoryuken (and ferrolock through Shoryuken::Message#delete) asked SQS to do.
  # Shoryuken passes each call's parameters as one positional Hash. Messages are "sent" into an
  # inbox and "received" from it; one message may be received any number of times (SQS standard
  # queues deliver at least once).
  class FakeSqsClient
    Reply = Struct.new(:queue_url, :attributes, :messages, :failed, :successful, :message_id, keyword_init: true)
    # The fields of Aws::SQS::Types::Message that Shoryuken::Message delegates to.
    MessageData = Struct.new(:message_id, :receipt_handle, :md5_of_body, :body, :attributes,
                             :md5_of_message_attributes, :message_attributes, keyword_init: true)

    def initialize(visibility_timeout: 30)
      @visibility_timeout = visibility_timeout
      @calls = []
      @inbox = []
      @receipts = 0
      @lock = Mutex.new
    end

    # Every call so far, as [name, params], in order.
    def calls
      @lock.synchronize { @calls.dup }
    end

    # The calls named `name` (a Symbol), in order.
    def calls_to(name)
      @lock.synchronize { @calls.select { |call, _| call == name }.map(&:last) }
    end

    # Queues a delivery of message `id` (a copy when the id was delivered before).
    def deliver(id, body: "{}", receive_count: 1, message_attributes: {})
      data = MessageData.new(message_id: id, receipt_handle: next_receipt(id), body: body, md5_of_body: nil,
                             attributes: { "ApproximateReceiveCount" => receive_count.to_s },
                             md5_of_message_attributes: nil, message_attributes: message_attributes)
      @lock.synchronize { @inbox << data }
      data
    end

    def get_queue_url(params)
      record(:get_queue_url, params)
      Reply.new(queue_url: "https://sqs.test.amazonaws.com/000000000000/#{params.fetch(:queue_name)}")
    end

    def get_queue_attributes(params)
      record(:get_queue_attributes, params)
      Reply.new(attributes: { "VisibilityTimeout" => @visibility_timeout.to_s, "FifoQueue" => "false" })
    end

    def receive_message(params)
      record(:receive_message, params)
      count = params.fetch(:max_number_of_messages, 1)
      Reply.new(messages: @lock.synchronize { @inbox.shift(count) })
    end

    # What ActiveJob's Shoryuken adapter calls; the message lands in the inbox, as SQS would.
    def send_message(params)
      record(:send_message, params)
      id = "sent-#{@lock.synchronize { @receipts += 1 }}"
      deliver(id, body: params[:message_body], message_attributes: params[:message_attributes] || {})
      Reply.new(message_id: id)
    end

    def delete_message(params)
      record(:delete_message, params)
      Reply.new
    end

    def delete_message_batch(params)
      record(:delete_message_batch, params)
      Reply.new(failed: [], successful: params[:entries])
    end

    def change_message_visibility(params)
      record(:change_message_visibility, params)
      Reply.new
    end

    def change_message_visibility_batch(params)
      record(:change_message_visibility_batch, params)
      Reply.new(failed: [], successful: params[:entries])
    end

    private

    def record(name, params)
      @lock.synchronize { @calls << [name, params] }
    end

    def next_receipt(id)
      "receipt-#{id}-#{@lock.synchronize { @receipts += 1 }}"
    end
  end
end
