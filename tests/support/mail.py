"""A local SMTP server for the mail notifier's test: keeps every message it is sent."""
import asyncore
import smtpd
import threading


class MailCatcher(smtpd.SMTPServer):
    def __init__(self):
        super().__init__(("127.0.0.1", 0), None, decode_data=False)
        self.port = self.socket.getsockname()[1]
        self.messages: list[bytes] = []
        self._thread = threading.Thread(target=asyncore.loop, kwargs={"timeout": 0.1, "use_poll": True}, daemon=True)
        self._thread.start()

    def process_message(self, peer, mailfrom, rcpttos, data, **kwargs):
        self.messages.append(data)

    def stop(self):
        self.close()
        self._thread.join(timeout=5)
